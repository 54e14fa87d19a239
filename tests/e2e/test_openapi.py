"""The OpenAPI document at /schema, from a real gateway process: every public and admin route, with
the generation endpoints' bodies and each protocol's own error shape."""

from __future__ import annotations

import httpx
import pytest

from tests.support import plain_http
from tests.support.gateway import Gateway


@pytest.fixture(scope="module")
def document(gateway: Gateway) -> dict:
    answer = plain_http.get(gateway.base_url.removesuffix("/v1") + "/schema/openapi.json")
    assert answer.status_code == 200
    return answer.json()


def _resolve(document: dict, schema: dict) -> dict:
    ref = schema.get("$ref")
    return document["components"]["schemas"][ref.rsplit("/", 1)[-1]] if ref else schema


def test_every_public_and_admin_route_is_documented(document: dict):
    assert document["openapi"].startswith("3.1")
    paths = document["paths"]
    for path in (
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/models",
        "/v1/models/{model_id}",
        "/admin/teams",
        "/admin/teams/{name}/credits",
        "/admin/teams/{name}/keys",
        "/admin/teams/{name}/history",
        "/admin/teams/{name}/limits",
        "/admin/teams/{name}/suspend",
        "/v1/requests/{request_id}",
        "/admin/requests/{request_id}",
        "/dashboard",
        "/dashboard/api/session",
        "/dashboard/api/teams/{name}",
        "/dashboard/api/teams/{name}/history",
        "/dashboard/api/teams/{name}/usage",
        "/dashboard/api/teams/{name}/requests",
        "/dashboard/api/teams/{name}/export",
        "/admin/teams/{name}/statements/{month}",
        "/dashboard/api/teams/{name}/statements/{month}",
    ):
        assert path in paths, path


def test_a_statement_is_documented_as_json_or_csv(document: dict):
    for path in ("/admin/teams/{name}/statements/{month}", "/dashboard/api/teams/{name}/statements/{month}"):
        operation = document["paths"][path]["get"]
        assert set(operation["responses"]["200"]["content"]) == {"application/json", "text/csv"}
        assert {p["name"] for p in operation["parameters"]} >= {"name", "month", "format", "chained"}


@pytest.mark.parametrize(
    ("path", "required"),
    [
        ("/v1/chat/completions", {"model", "messages"}),
        ("/v1/responses", {"model", "input"}),
        ("/v1/messages", {"model", "messages", "max_tokens"}),
    ],
)
def test_generation_endpoints_document_the_body_the_gateway_validates(document: dict, path: str, required: set):
    operation = document["paths"][path]["post"]
    body = _resolve(document, operation["requestBody"]["content"]["application/json"]["schema"])
    assert required <= set(body["required"])
    assert body.get("additionalProperties", True) is not False  # other fields pass through to the upstream
    assert "text/event-stream" in operation["responses"]["200"]["content"]


def test_errors_are_documented_in_each_protocols_own_shape(document: dict):
    chat_402 = document["paths"]["/v1/chat/completions"]["post"]["responses"]["402"]
    assert _resolve(document, chat_402["content"]["application/json"]["schema"])["required"] == ["error"]
    messages_402 = document["paths"]["/v1/messages"]["post"]["responses"]["402"]
    assert _resolve(document, messages_402["content"]["application/json"]["schema"])["required"] == ["type", "error"]


def test_the_schema_page_is_served(gateway: Gateway):
    page = plain_http.get(gateway.base_url.removesuffix("/v1") + "/schema")
    assert page.status_code == 200
    assert "text/html" in page.headers["content-type"]


def test_admin_routes_document_their_bodies_and_the_admin_key(document: dict):
    create = document["paths"]["/admin/teams"]["post"]
    body = _resolve(document, create["requestBody"]["content"]["application/json"]["schema"])
    assert "name" in body["required"]
    assert "credits" in body["properties"]
    assert create["security"] == [{"bearer": []}]
    limits = document["paths"]["/admin/teams/{name}/keys/{key_id}/limits"]["put"]
    new_limits = _resolve(document, limits["requestBody"]["content"]["application/json"]["schema"])
    assert set(new_limits["properties"]) >= {"rpm", "tpm"}


def test_the_dashboard_api_documents_its_answers_and_keys(document: dict):
    summary = document["paths"]["/dashboard/api/teams/{name}"]["get"]
    assert summary["security"] == [{"bearer": []}]
    refusal = _resolve(document, summary["responses"]["403"]["content"]["application/json"]["schema"])
    assert refusal["required"] == ["error"]
    team = _resolve(document, summary["responses"]["200"]["content"]["application/json"]["schema"])
    assert team["properties"]["balance"]["type"] == "number"  # exact decimals, sent as JSON numbers
    assert "text/html" in document["paths"]["/dashboard"]["get"]["responses"]["200"]["content"]


# -- the documented errors are the errors the gateway sends -----------------------------------------


def _operations(document: dict):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict):
                yield path, method, operation


def _documented_error(document: dict, path: str, method: str, status: int) -> dict:
    responses = document["paths"][path][method]["responses"]
    answer = responses.get(str(status)) or responses["default"]
    return {**answer["content"]["application/json"]["schema"], "components": document["components"]}


def _conforms(document: dict, path: str, method: str, answer: httpx.Response) -> None:
    import jsonschema

    assert answer.status_code >= 400, answer.text
    jsonschema.validate(answer.json(), _documented_error(document, path, method, answer.status_code))


def test_no_route_documents_litestar_s_own_error_body(document: dict):
    for path, method, operation in _operations(document):
        for code, answer in operation["responses"].items():
            if path == "/health/ready" and code == "503":  # not an error body: the readiness report, and why not
                assert answer["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Readiness"}
                continue
            if code == "default" or code[0] in "45":
                schema = answer["content"]["application/json"]["schema"]
                if path.startswith("/v1/models"):  # Anthropic's or Google's shape, by the client's headers
                    assert schema == {
                        "anyOf": [
                            {"$ref": "#/components/schemas/OpenAIError"},
                            {"$ref": "#/components/schemas/AnthropicError"},
                            {"$ref": "#/components/schemas/GoogleError"},
                        ]
                    }, (path, code)
                    continue
                expected = (
                    "AnthropicError"
                    if path.startswith("/v1/messages")
                    else "GoogleError"
                    if path.startswith("/v1beta/")
                    else "OpenAIError"
                )
                assert schema == {"$ref": f"#/components/schemas/{expected}"}, (path, method, code)
        if not path.startswith("/health"):
            assert "default" in operation["responses"], (path, method)


def test_every_route_s_errors_match_its_documented_error_body(gateway: Gateway, team, document: dict):
    """Each route refused without a key, with a key of the wrong kind, and with bad input (a JSON
    body that is not JSON, a query parameter of the wrong type, an unknown team or request): every
    answer validates against the error body the document gives for its status."""
    root = gateway.root_url
    checked = 0
    for path, method, _ in _operations(document):
        if path.startswith("/health") or path in ("/v1/models", "/v1beta/models", "/dashboard"):
            continue
        url = root + path.format(
            name=team.name,
            key_id="key_nope",
            request_id="req_nope",
            month="2026-11",
            model_id="no-such-model",
            file_id="file-nope",
            batch_id="batch_nope",
        )
        for attempt in _refused_attempts(root, path, method, team):
            answer = plain_http.request(
                method.upper(),
                attempt.get("url", url),
                headers=attempt.get("headers"),
                content=attempt.get("content"),
                params=attempt.get("params"),
                timeout=30,
            )
            if answer.status_code == 200 and path == "/dashboard/api/session":
                continue
            _conforms(document, path, method, answer)
            checked += 1
    assert checked >= 80


def _refused_attempts(root: str, path: str, method: str, team) -> list[dict]:
    """The ways ``path`` is asked that it must refuse (``url``: another than the route's own)."""
    from tests.support.refusals import admin_headers

    other_team = "no-such-team"
    attempts: list[dict] = [{}, {"headers": {"authorization": "Bearer not-a-key"}}]
    if path.startswith("/admin"):
        attempts.append({"headers": {"authorization": f"Bearer {team.key}"}})  # 403
        if "{name}" in path:  # 404: an unknown team
            attempts.append(
                {"headers": admin_headers(), "url": root + path.format(name=other_team, key_id="k", month="2026-11")}
            )
        if "{request_id}" in path:  # 404: an unknown request
            attempts.append({"headers": admin_headers()})
        if method in ("post", "put"):
            attempts.append({"headers": admin_headers(), "content": b"{not json"})
        if "history" in path:
            attempts.append({"headers": admin_headers(), "params": {"page": "abc"}})
        if "{month}" in path:  # 400: a month that is not one
            attempts.append({"headers": admin_headers(), "url": root + path.format(name=team.name, month="2026-13")})
    elif path.startswith("/dashboard/api/teams"):
        elsewhere = root + path.format(name=other_team, month="2026-11")
        attempts.append({"headers": {"authorization": f"Bearer {team.key}"}, "url": elsewhere})  # 403: another team
        attempts.append({"headers": admin_headers(), "url": elsewhere})  # 404
        if path.endswith(("/history", "/requests")):  # 400: a query parameter of the wrong type
            attempts.append({"headers": {"authorization": f"Bearer {team.key}"}, "params": {"page": "x", "limit": "x"}})
    elif path == "/v1/models/{model_id}":  # 404: an unknown model, in Anthropic's shape for its clients
        attempts.append({"headers": {"anthropic-version": "2023-06-01"}})
    elif path == "/v1/requests/{request_id}":  # 404: an unknown request
        attempts.append({"headers": {"authorization": f"Bearer {team.key}"}})
    elif path.startswith("/v1") and method == "post":
        attempts.append(
            {"headers": {"authorization": f"Bearer {team.key}", "x-api-key": team.key}, "content": b"{not json"}
        )
    return attempts


def test_litestar_s_own_refusals_on_admin_routes_are_in_the_openai_shape_naming_the_parameter(
    gateway: Gateway, team, document: dict
):
    from tests.support.refusals import admin_headers, error_of

    answer = plain_http.get(
        f"{gateway.root_url}/admin/teams/{team.name}/history", params={"page": "abc"}, headers=admin_headers()
    )
    error = error_of(answer, 400)
    assert error["param"] == "page"
    assert "Invalid 'page' in the query" in error["message"]
    _conforms(document, "/admin/teams/{name}/history", "get", answer)
    wrong_method = plain_http.delete(f"{gateway.root_url}/admin/teams", headers=admin_headers())
    assert error_of(wrong_method, 405)["type"] == "invalid_request_error"
    _conforms(document, "/admin/teams", "get", wrong_method)
