"""Each request held to its deadlines and its answer to HTTP's rules, above every route.

uvicorn reads a request's body only as the application asks for it (``receive``), and sets no
deadline on it: a client sending its body a byte at a time would keep its request, and what its
handler holds, for as long as it liked. Here every wait for the body shares one deadline, counted
from the moment the headers were in; past it, ``receive`` raises :class:`RequestTimeout`, which
the handler answers as any error, in its endpoint's shape (408).

An answer that starts before the body was read to its end — a 413 for a body over the limit, a 401,
a 404, that 408 — says ``connection: close``. Otherwise uvicorn would go on reading the rest of the
body, and throwing it away, to keep the connection for another request: as long as the client
cares to send. (The HTTP protocol then closes the connection gently, ``app/http/protocol.py``, so
that the client, still sending, reads the answer rather than a reset.)

Every answer's head is checked against the rules uvicorn applies before it reaches uvicorn
(``app/http/answer_head.py``): uvicorn counts an answer as started before it checks its headers, so
one it refuses leaves the client with no answer at all. Whatever fails before an answer began — such
a head, or any error a route's own handling let through — is answered here in the endpoint's JSON
error shape (with the ``x-request-id`` every answer carries), never uvicorn's plain-text 500.

``HEAD`` is served wherever ``GET`` is: the routes see a ``GET``, and the answer goes out without
its body (its ``content-length`` kept, as RFC 9110 asks). So every ``Allow`` that lists ``GET`` lists
``HEAD`` too (:func:`with_head`): a 405's (``app/http/server.py``), and the answer to an ``OPTIONS``
request, which the router writes without knowing that this guard serves ``HEAD``.

A client that stops reading an answer is cut off below, by the HTTP protocol
(``app/http/protocol.py``); its :class:`ClientTooSlow` ends the request here, quietly: the
connection is already gone, and a stream's relay bills what was sent (``app/http/relay.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from app.errors import GatewayError, RequestTimeout
from app.http.answer_head import check
from app.http.protocol import ClientTooSlow
from app.json import encode
from app.observability.record import current_record

log = logging.getLogger("tollgate")

_CLOSE = (b"connection", b"close")


def with_head(methods: str) -> str:
    """An ``Allow`` value as the router lists it, with ``HEAD`` beside ``GET`` (this guard serves it)."""
    allowed = [m.strip() for m in methods.split(",") if m.strip()]
    if "GET" in allowed and "HEAD" not in allowed:
        allowed.insert(allowed.index("GET") + 1, "HEAD")
    return ", ".join(allowed)


def _allow_with_head(headers: Any) -> list[tuple[bytes, bytes]]:
    return [(n, with_head(v.decode("latin-1")).encode("latin-1") if n.lower() == b"allow" else v) for n, v in headers]


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

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head = scope["method"] == "HEAD"
        exchange = _Exchange(receive, send, self.body_timeout, _has_body(scope), head)
        exchange.options = scope["method"] == "OPTIONS"
        try:
            try:
                await self.app({**scope, "method": "GET"} if head else scope, exchange.receive, exchange.send)
            except* ClientTooSlow as cut:
                record = current_record()
                if record is not None:
                    record.failed(str(cut.exceptions[0]))
        except Exception as exc:
            if exchange.started:
                raise  # the client has part of the answer: uvicorn ends the connection
            await exchange.fail(scope["path"], exc)


class _Exchange:
    """One request's ``receive`` under the body's deadline, and its ``send``, which checks the
    answer's head and closes the connection after an answer given before the body was in."""

    def __init__(
        self,
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
        timeout: float,
        has_body: bool,
        head: bool,
    ) -> None:
        self._receive = receive
        self._send = send
        self._timeout = timeout
        self._deadline = asyncio.get_running_loop().time() + timeout
        self._body_done = not has_body
        self._head = head
        self.options = False  # an OPTIONS request: its answer's ``Allow`` gains ``HEAD`` beside ``GET``
        self.started = False  # the answer's head was handed to the server

    async def receive(self) -> Any:
        if self._body_done:
            return await self._receive()
        try:
            async with asyncio.timeout_at(self._deadline):
                message = await self._receive()
        except TimeoutError:
            raise RequestTimeout(
                f"The request body did not arrive within {self._timeout:g} seconds.", headers={"connection": "close"}
            ) from None
        if message["type"] != "http.request" or not message.get("more_body", False):
            self._body_done = True
        return message

    async def send(self, message: Any) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            headers = message.get("headers", ())
            if self.options:
                headers = message["headers"] = _allow_with_head(headers)
            check(headers)  # before the server sees it: a head it would refuse is still ours to answer
            if not self._body_done and not any(name.lower() == b"connection" for name, _ in headers):
                message["headers"] = [*headers, _CLOSE]
            self.started = True
        elif self._head and kind == "http.response.body" and message.get("body"):
            message = {**message, "body": b""}
        await self._send(message)

    async def fail(self, path: str, exc: Exception) -> None:
        """Answer a failure before the answer began as the endpoint's JSON error (a 500, unless the
        failure is one of the gateway's own errors with a status of its own)."""
        if not isinstance(exc, GatewayError):
            log.error("unhandled error before the answer began", exc_info=exc)
            exc = GatewayError("The gateway hit an internal error.")
        else:
            log.error("could not answer: %s", exc.message)
        record = current_record()
        if record is not None:
            record.failed(exc.message)
        body = encode(exc.anthropic_body() if path.startswith("/v1/messages") else exc.openai_body())
        retry = b"true" if exc.retryable else b"false"  # the error's own headers are what may have failed
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"x-should-retry", retry),
        ]
        await self.send({"type": "http.response.start", "status": exc.status, "headers": headers})
        await self.send({"type": "http.response.body", "body": body, "more_body": False})
