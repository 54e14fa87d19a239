"""Every pair of client protocol and upstream wire, plain and streaming, through the real
application: passed through when they match, translated otherwise (``app/translate/exchange.py``,
``app/translate``). Each answer must carry the upstream's text and usage in the client's own
shape, and the cost it reports must be exactly what the ledger charged."""

from __future__ import annotations

import json
from decimal import Decimal
from itertools import count
from typing import Any

import pytest

from tests.support.in_process import InProcessGateway, charge_of, in_credits

#: The fake upstream's models, one per wire: Chat Completions, Anthropic Messages, OpenAI Responses.
MODELS = ["fake-gpt", "fake-claude", "fake-codex"]
ENDPOINTS = ["/v1/chat/completions", "/v1/messages", "/v1/responses"]
TEXT = "alpha beta"  # the fake echoes it: "Echo: alpha beta", 3 output tokens for a 5-token prompt
_teams = count(1)


def body_for(endpoint: str, model: str, stream: bool) -> dict[str, Any]:
    if endpoint == "/v1/responses":
        return {"model": model, "input": TEXT, "stream": stream}
    body = {"model": model, "messages": [{"role": "user", "content": TEXT}], "stream": stream}
    if endpoint == "/v1/messages":
        body["max_tokens"] = 100
    elif stream:
        body["stream_options"] = {"include_usage": True}  # the usage chunk, with the cost, at the end
    return body


def events(raw: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:], parse_float=Decimal) for line in raw.splitlines() if line.startswith("data: {")]


def read_plain(endpoint: str, answer: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The answer's text and usage object."""
    if endpoint == "/v1/chat/completions":
        return answer["choices"][0]["message"]["content"], answer["usage"]
    if endpoint == "/v1/messages":
        return "".join(part["text"] for part in answer["content"]), answer["usage"]
    return answer["output"][-1]["content"][0]["text"], answer["usage"]


def read_stream(endpoint: str, raw: str) -> tuple[str, dict[str, Any]]:
    """The text of the stream's deltas, and the usage object of its final event."""
    found = events(raw)
    if endpoint == "/v1/chat/completions":
        text = "".join(c["delta"].get("content") or "" for e in found for c in e["choices"])
        return text, next(e["usage"] for e in found if e.get("usage"))
    if endpoint == "/v1/messages":
        text = "".join(e["delta"]["text"] for e in found if e["type"] == "content_block_delta")
        return text, next(e["usage"] for e in found if e["type"] == "message_delta")
    text = "".join(e["delta"] for e in found if e["type"] == "response.output_text.delta")
    return text, next(e["response"]["usage"] for e in found if e["type"] == "response.completed")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_each_pair_answers_in_the_client_s_shape_and_reports_what_was_charged(
    shared_gateway: InProcessGateway, endpoint: str, model: str, stream: bool
):
    name = f"codec-{next(_teams)}"
    team = shared_gateway.open_team(name)
    answer = shared_gateway.post(team, endpoint, body_for(endpoint, model, stream))
    assert answer.status_code == 200, answer.text
    if stream:
        assert answer.headers["content-type"].startswith("text/event-stream")
        text, usage = read_stream(endpoint, answer.text)
    else:
        text, usage = read_plain(endpoint, json.loads(answer.content, parse_float=Decimal))
    assert text == "Echo: alpha beta"
    tokens = (
        (usage["prompt_tokens"], usage["completion_tokens"])
        if endpoint == "/v1/chat/completions"
        else (usage["input_tokens"], usage["output_tokens"])
    )
    assert tokens == (5, 3)
    charged = charge_of(shared_gateway.runtime.store, name, answer.headers["x-request-id"]).charged
    assert usage["cost"]["credits"] == in_credits(charged) > 0
    assert usage["remaining"]["credits"] == 100 - in_credits(charged)
