"""GET /v1/models: every field of spec 2.1, without authentication."""

from __future__ import annotations

import json
from decimal import Decimal

import httpx
import openai

from tests.support.gateway import Gateway

MODEL_IDS = ["fake-gpt", "demo-gpt", "fake-claude", "slow-gpt", "dead-gpt", "small-claude", "vision-gpt",
             "fake-codex", "agent-claude", "agent-gpt", "agent-codex", "passing-gpt", "refusing-claude",
             "dropping-claude", "refused-gpt", "overloaded-gpt", "hung-gpt",
             "twin-gpt", "once-gpt", "cut-gpt", "overloaded-claude", "twin-claude",
             "strict-gpt", "strict-demo", "strict-claude", "strict-codex"]


def test_the_model_list_has_every_field_and_needs_no_key(gateway: Gateway):
    response = httpx.get(gateway.base_url + "/models")  # no Authorization header
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = json.loads(response.content, parse_float=Decimal)
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == MODEL_IDS

    fake = body["data"][0]
    assert set(fake) == {
        "id", "object", "created", "owned_by", "display_name", "context_window", "max_output_tokens",
        "capabilities", "reasoning", "pricing",
    }
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
        "input": Decimal("2.5"), "output": Decimal("10.0"),
        "cache_create": Decimal("3.125"), "cache_hit": Decimal("1.25"),
    }
    assert b'"cache_create":3.125' in response.content


def test_the_openai_sdk_lists_the_models(gateway: Gateway):
    client = openai.OpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0)
    models = client.models.list().data
    assert [m.id for m in models] == MODEL_IDS
    assert models[0].model_extra["context_window"] == 8192
