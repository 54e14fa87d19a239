"""GET /v1/models: every field of spec 2.1, without authentication."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal

import anthropic
import openai
import pytest

from tests.support import plain_http
from tests.support.gateway import Gateway

MODEL_IDS = [
    "fake-gpt",
    "demo-gpt",
    "fake-claude",
    "slow-gpt",
    "dead-gpt",
    "small-claude",
    "vision-gpt",
    "fake-codex",
    "agent-claude",
    "agent-gpt",
    "agent-codex",
    "agent-gemini",
    "passing-gpt",
    "refusing-claude",
    "dropping-claude",
    "refused-gpt",
    "overloaded-gpt",
    "hung-gpt",
    "twin-gpt",
    "once-gpt",
    "cut-gpt",
    "overloaded-claude",
    "twin-claude",
    "strict-gpt",
    "strict-demo",
    "strict-claude",
    "strict-codex",
    "clamping-gpt",
    "clamping-claude",
    "clamping-codex",
]


def test_the_model_list_has_every_field_and_needs_no_key(gateway: Gateway):
    response = plain_http.get(gateway.base_url + "/models")  # no Authorization header
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = json.loads(response.content, parse_float=Decimal)
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == MODEL_IDS

    fake = body["data"][0]
    assert set(fake) == {
        "id",
        "object",
        "created",
        "owned_by",
        "display_name",
        "context_window",
        "max_output_tokens",
        "capabilities",
        "endpoints",
        "reasoning",
        "pricing",
    }
    assert fake["endpoints"] == ["chat.completions", "responses", "messages", "generate_content"]  # unset: generation
    assert fake["object"] == "model"
    assert isinstance(fake["created"], int)
    assert fake["created"] > 1_600_000_000
    assert (fake["owned_by"], fake["display_name"]) == ("acme", "Fake GPT")
    assert (fake["context_window"], fake["max_output_tokens"]) == (8192, 1024)
    assert fake["capabilities"] == {"vision": False}
    assert fake["reasoning"] == {
        "effort_levels": [
            {"value": "low", "display": "Low"},
            {"value": "medium", "display": "Medium"},
            {"value": "high", "display": "High"},
        ],
        "default_effort_level": "medium",
    }
    # Prices are JSON numbers carrying exactly the configured decimals.
    assert fake["pricing"] == {
        "input": Decimal("2.5"),
        "output": Decimal("10.0"),
        "cache_create": Decimal("3.125"),
        "cache_hit": Decimal("1.25"),
    }
    assert b'"cache_create":3.125' in response.content


def test_the_openai_sdk_lists_the_models(gateway: Gateway):
    with openai.OpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0) as client:
        models = client.models.list().data
        assert [m.id for m in models] == MODEL_IDS
        assert models[0].model_extra["context_window"] == 8192


def test_the_openai_sdk_retrieves_a_model_as_the_list_has_it(gateway: Gateway):
    with openai.OpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0) as client:
        model = client.models.retrieve("fake-gpt")
        assert (model.id, model.object, model.owned_by) == ("fake-gpt", "model", "acme")
        assert model.model_extra["max_output_tokens"] == 1024
        listed = json.loads(plain_http.get(gateway.base_url + "/models").content, parse_float=Decimal)["data"][0]
        alone = plain_http.get(gateway.base_url + "/models/fake-gpt")  # no key
        assert alone.status_code == 200
        assert json.loads(alone.content, parse_float=Decimal) == listed


def test_an_unknown_model_is_a_404_in_openai_s_shape(gateway: Gateway):
    with openai.OpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0) as client:
        with pytest.raises(openai.NotFoundError) as missing:
            client.models.retrieve("no-such-model")
        assert missing.value.body == {
            "message": "The model `no-such-model` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": "model",
            "code": None,
        }
        slashed = plain_http.get(gateway.base_url + "/models/org%2Fno-such-model")  # an id may hold a slash
        assert slashed.status_code == 404
        assert "`org/no-such-model`" in slashed.json()["error"]["message"]


def test_the_anthropic_sdk_retrieves_a_model_in_anthropic_s_shape(gateway: Gateway):
    with anthropic.Anthropic(base_url=gateway.root_url, api_key="unused", max_retries=0) as claude:
        model = claude.models.retrieve("fake-claude")
        assert (model.type, model.id, model.display_name) == ("model", "fake-claude", "Fake Claude")
        listed = plain_http.get(gateway.base_url + "/models/fake-claude").json()  # OpenAI's shape: Unix time
        assert model.created_at.timestamp() == listed["created"]
        assert (model.max_input_tokens, model.max_tokens) == (200000, 4096)
        raw = plain_http.get(
            gateway.base_url + "/models/fake-claude", headers={"anthropic-version": "2023-06-01"}
        ).json()
        assert set(raw) == {"type", "id", "display_name", "created_at", "lifecycle", "max_input_tokens", "max_tokens"}
        assert raw["created_at"].endswith("Z")
        assert datetime.fromisoformat(raw["created_at"]) == model.created_at
        with pytest.raises(anthropic.NotFoundError) as missing:
            claude.models.retrieve("no-such-model")
        assert missing.value.body == {
            "type": "error",
            "error": {
                "type": "not_found_error",
                "message": ("The model `no-such-model` does not exist or you do not have access to it."),
            },
        }


def test_the_anthropic_sdk_lists_the_models_page_by_page(gateway: Gateway):
    with anthropic.Anthropic(base_url=gateway.root_url, api_key="unused", max_retries=0) as claude:
        first = claude.models.list()
        assert [m.id for m in first.data] == MODEL_IDS[:20]  # Anthropic's default page
        assert (first.has_more, first.first_id, first.last_id) == (True, MODEL_IDS[0], MODEL_IDS[19])
        assert [m.id for m in claude.models.list()] == MODEL_IDS  # the SDK walks the pages (after_id)
        assert [m.id for m in claude.models.list(limit=3, after_id="fake-claude").data] == MODEL_IDS[3:6]
        before = claude.models.list(limit=2, before_id="fake-claude")
        assert ([m.id for m in before.data], before.has_more) == (MODEL_IDS[0:2], False)
        assert all(m.type == "model" and m.created_at is not None for m in first.data)
        with pytest.raises(anthropic.BadRequestError) as refused:
            claude.models.list(limit=0)
        assert refused.value.body["error"]["type"] == "invalid_request_error"
