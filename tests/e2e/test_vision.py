"""An image for a model without vision is a 400 on every endpoint, whatever its upstream — passed
through or translated, streamed or not, wherever in the conversation the image is — before the
upstream is called or anything is held."""

from __future__ import annotations

import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import STRICT_MODELS, Gateway
from tests.support.refusals import error_of, key_headers, money_of

PNG = "iVBORw0KGgo="
URL = f"data:image/png;base64,{PNG}"
#: A model without vision for each upstream kind: openai, demo, anthropic, openai-responses.
BLIND = list(STRICT_MODELS)

_CHAT_IMAGE = {"type": "image_url", "image_url": {"url": URL}}
_MESSAGES_IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
_RESPONSES_IMAGE = {"type": "input_image", "image_url": URL}

#: (endpoint, where the image is, body without its model)
BODIES = [
    (
        "/v1/chat/completions",
        "user",
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, _CHAT_IMAGE]}]},
    ),
    (
        "/v1/chat/completions",
        "tool result",
        {
            "messages": [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{}"}}],
                },
                {"role": "tool", "tool_call_id": "c1", "content": [_CHAT_IMAGE]},
            ]
        },
    ),
    ("/v1/responses", "user", {"input": [{"role": "user", "content": [_RESPONSES_IMAGE]}]}),
    (
        "/v1/responses",
        "tool output",
        {
            "input": [
                {"type": "function_call", "call_id": "c1", "name": "look", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": [_RESPONSES_IMAGE]},
            ]
        },
    ),
    ("/v1/messages", "user", {"max_tokens": 10, "messages": [{"role": "user", "content": [_MESSAGES_IMAGE]}]}),
    (
        "/v1/messages",
        "tool result",
        {
            "max_tokens": 10,
            "messages": [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "look", "input": {}}]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [_MESSAGES_IMAGE]}],
                },
            ],
        },
    ),
    (
        "/v1/messages",
        "document",
        {
            "max_tokens": 10,
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "document", "source": {"type": "content", "content": [_MESSAGES_IMAGE]}}],
                }
            ],
        },
    ),
]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("model", BLIND)
@pytest.mark.parametrize(("path", "where", "body"), BODIES, ids=[f"{p.rsplit('/', 1)[1]}-{w}" for p, w, _ in BODIES])
def test_an_image_for_a_model_without_vision_is_a_400_and_nothing_is_held_or_called(
    gateway: Gateway, teams, fake_upstream: FakeUpstream, path, where, body, model, stream
):
    team = teams.open("10")
    answer = plain_http.post(
        gateway.root_url + path,
        json={**body, "model": model, "stream": stream},
        headers={**key_headers(team.key), "anthropic-version": "2023-06-01"},
        timeout=30,
    )
    error = error_of(answer, 400)
    assert f"The model `{model}` does not support images." == error["message"]
    assert money_of(gateway, team.name) == (10, 0)
    assert fake_upstream.requests == []
