"""A whole answer sent by the fast path is, message for message, what Litestar would have sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from litestar import Response
from litestar.testing import RequestFactory

from app.http.hot_paths import _is_whole, _send_whole

CASES = [
    Response(
        b'{"id":"chatcmpl-1"}',
        headers={"X-Request-Id": "req_1", "x-ratelimit-limit-requests": "60"},
        media_type="application/json",
    ),
    Response(b'{"error":{}}', status_code=402, headers={"Connection": "close"}, media_type="application/json"),
    Response(b"plain words", media_type="text/plain"),
    Response(b"{}"),
    Response(b"{}", status_code=201, headers={"content-type": "application/x-ndjson"}),
]


def _sent(send_with: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        messages.append(message)

    asyncio.run(send_with(send))
    return messages


@pytest.mark.parametrize("response", CASES)
def test_a_whole_answer_is_sent_as_litestar_sends_it(response):
    assert _is_whole(response)
    request = RequestFactory().post("/v1/chat/completions")
    litestar = _sent(lambda send: response.to_asgi_response(None, request)({"type": "http"}, None, send))
    assert _sent(lambda send: _send_whole(response, send)) == litestar


def test_what_litestar_must_finish_itself_takes_its_way():
    assert not _is_whole(Response(b"", status_code=204))
    assert not _is_whole(Response({"not": "bytes"}))
