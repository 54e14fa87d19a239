"""Above every route: whatever fails before an answer began is answered as the endpoint's JSON error,
a head uvicorn would refuse never reaches it, and HEAD is served as GET without the body.

In process, with the ASGI messages the server would get: the failures here are ones no route lets
through on purpose any more (the end-to-end suite shows the routes' own), so the guard behind them is
checked on its own.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.http.request_guard import RequestGuard


def scope(path: str, method: str = "POST") -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "headers": [(b"content-length", b"0")]}


async def served(app: Any, path: str, method: str = "POST") -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        # uvicorn refuses such a head only after counting the answer as begun: it must never see one
        for _, value in message.get("headers", ()):
            assert not {b"\n"[0], b"\r"[0]} & set(value), "the server was handed a head it refuses"
        sent.append(message)

    await RequestGuard(app, 60.0)(scope(path, method), receive, send)
    return sent


async def failing(scope: Any, receive: Any, send: Any) -> None:
    raise RuntimeError("a bug")


async def unsendable(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"x-tools", b"a\r\nx-injected: 1")]})
    await send({"type": "http.response.body", "body": b"{}"})


@pytest.mark.parametrize("app", [failing, unsendable], ids=["an-error", "an-unsendable-head"])
@pytest.mark.parametrize(("path", "shape"), [("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic")])
async def test_a_failure_before_the_answer_began_is_the_endpoints_json_error(app: Any, path: str, shape: str):
    start, body = await served(app, path)
    assert start["status"] == 500
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"x-should-retry"] == b"true"
    error = json.loads(body["body"])
    if shape == "anthropic":
        assert (error["type"], error["error"]["type"]) == ("error", "api_error")
    else:
        assert error["error"]["type"] == "server_error"


async def test_head_is_served_as_get_without_its_body():
    seen = []

    async def route(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["method"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"{}"})

    start, body = await served(route, "/v1/models", method="HEAD")
    assert seen == ["GET"]
    assert dict(start["headers"])[b"content-length"] == b"2"
    assert body["body"] == b""
