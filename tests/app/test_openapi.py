"""The OpenAPI document at /schema, from a real gateway process: every public and admin route, with
the generation endpoints' bodies and each protocol's own error shape."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway import Gateway


@pytest.fixture(scope="module")
def document(gateway: Gateway) -> dict:
    answer = httpx.get(gateway.base_url.removesuffix("/v1") + "/schema/openapi.json")
    assert answer.status_code == 200
    return answer.json()


def _resolve(document: dict, schema: dict) -> dict:
    ref = schema.get("$ref")
    return document["components"]["schemas"][ref.rsplit("/", 1)[-1]] if ref else schema


def test_every_public_and_admin_route_is_documented(document: dict):
    assert document["openapi"].startswith("3.1")
    paths = document["paths"]
    for path in ("/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens", "/v1/models",
                 "/admin/teams", "/admin/teams/{name}/credits", "/admin/teams/{name}/keys",
                 "/admin/teams/{name}/history", "/admin/teams/{name}/limits", "/admin/teams/{name}/suspend",
                 "/dashboard", "/dashboard/api/session", "/dashboard/api/teams/{name}",
                 "/dashboard/api/teams/{name}/history", "/dashboard/api/teams/{name}/usage",
                 "/dashboard/api/teams/{name}/requests", "/dashboard/api/teams/{name}/export"):
        assert path in paths, path


@pytest.mark.parametrize("path, required", [
    ("/v1/chat/completions", {"model", "messages"}),
    ("/v1/responses", {"model", "input"}),
    ("/v1/messages", {"model", "messages", "max_tokens"}),
])
def test_generation_endpoints_document_the_body_the_gateway_validates(document: dict, path: str, required: set):
    operation = document["paths"][path]["post"]
    body = _resolve(document, operation["requestBody"]["content"]["application/json"]["schema"])
    assert required <= set(body["required"])
    assert body.get("additionalProperties", True) is not False  # other fields pass through to the upstream
    assert "text/event-stream" in operation["responses"]["200"]["content"]


def test_errors_are_documented_in_each_protocols_own_shape(document: dict):
    chat_402 = document["paths"]["/v1/chat/completions"]["post"]["responses"]["402"]
    assert chat_402["content"]["application/json"]["schema"]["required"] == ["error"]
    messages_402 = document["paths"]["/v1/messages"]["post"]["responses"]["402"]
    assert messages_402["content"]["application/json"]["schema"]["required"] == ["type", "error"]


def test_the_schema_page_is_served(gateway: Gateway):
    page = httpx.get(gateway.base_url.removesuffix("/v1") + "/schema")
    assert page.status_code == 200
    assert "text/html" in page.headers["content-type"]


def test_admin_routes_document_their_bodies_and_the_admin_key(document: dict):
    create = document["paths"]["/admin/teams"]["post"]
    body = _resolve(document, create["requestBody"]["content"]["application/json"]["schema"])
    assert "name" in body["required"] and "credits" in body["properties"]
    assert create["security"] == [{"bearer": []}]
    limits = document["paths"]["/admin/teams/{name}/keys/{key_id}/limits"]["put"]
    assert set(_resolve(document, limits["requestBody"]["content"]["application/json"]["schema"])["properties"]) >= {"rpm", "tpm"}


def test_the_dashboard_api_documents_its_answers_and_keys(document: dict):
    summary = document["paths"]["/dashboard/api/teams/{name}"]["get"]
    assert summary["security"] == [{"bearer": []}]
    assert summary["responses"]["403"]["content"]["application/json"]["schema"]["required"] == ["error"]
    team = _resolve(document, summary["responses"]["200"]["content"]["application/json"]["schema"])
    assert team["properties"]["balance"]["type"] == "number"  # exact decimals, sent as JSON numbers
    assert "text/html" in document["paths"]["/dashboard"]["get"]["responses"]["200"]["content"]
