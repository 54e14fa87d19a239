"""Each request held to its deadlines, above every route: its body within ``body_timeout``, and
nothing more read from a connection whose answer went out before its body was read.

uvicorn reads a request's body only as the application asks for it (``receive``), and sets no
deadline on it: a client sending its body a byte at a time would keep its request, and what its
handler holds, for as long as it liked. Here every wait for the body shares one deadline, counted
from the moment the headers were in; past it, ``receive`` raises :class:`RequestTimeout`, which
the handler answers as any error, in its endpoint's shape (408).

An answer that starts before the body was read to its end — a 413 for a body over the limit, a 401,
a 404, that 408 — says ``connection: close``. Otherwise uvicorn would go on reading the rest of the
body, and throwing it away, to keep the connection for another request: as long as the client
cares to send.

A client that stops reading an answer is cut off below, by the HTTP protocol
(``app/http/protocol.py``); its :class:`ClientTooSlow` ends the request here, quietly: the
connection is already gone, and a stream's relay bills what was sent (``app/http/relay.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from app.errors import RequestTimeout
from app.http.protocol import ClientTooSlow
from app.observability.record import current_record

_CLOSE = (b"connection", b"close")


def _has_body(scope: dict[str, Any]) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return value.strip() not in (b"0", b"")
        if name == b"transfer-encoding":
            return True
    return False


class RequestGuard:
    def __init__(self, app: Callable[..., Awaitable[None]], body_timeout: float) -> None:
        self.app = app
        self.body_timeout = body_timeout

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        exchange = _Exchange(receive, send, self.body_timeout, _has_body(scope))
        try:
            await self.app(scope, exchange.receive, exchange.send)
        except* ClientTooSlow as cut:
            record = current_record()
            if record is not None:
                record.failed(str(cut.exceptions[0]))


class _Exchange:
    """One request's ``receive`` under the body's deadline, and its ``send``, which closes the
    connection after an answer given before the body was in."""

    def __init__(self, receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]],
                 timeout: float, has_body: bool) -> None:
        self._receive = receive
        self._send = send
        self._timeout = timeout
        self._deadline = asyncio.get_running_loop().time() + timeout
        self._body_done = not has_body

    async def receive(self) -> Any:
        if self._body_done:
            return await self._receive()
        try:
            async with asyncio.timeout_at(self._deadline):
                message = await self._receive()
        except TimeoutError:
            raise RequestTimeout(f"The request body did not arrive within {self._timeout:g} seconds.",
                                 headers={"connection": "close"}) from None
        if message["type"] != "http.request" or not message.get("more_body", False):
            self._body_done = True
        return message

    async def send(self, message: Any) -> None:
        if message["type"] == "http.response.start" and not self._body_done:
            headers = list(message.get("headers", ()))
            if not any(name.lower() == b"connection" for name, _ in headers):
                message["headers"] = [*headers, _CLOSE]
        await self._send(message)
