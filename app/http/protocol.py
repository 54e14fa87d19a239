"""uvicorn's HTTP/1.1 protocol (httptools), with the limits a public server needs and uvicorn lacks.

uvicorn (0.54) has no deadline for a request's head — a client that connects and sends nothing, or
its headers a byte at a time, keeps its connection for ever — no limit on the head's size or on its
number of headers with httptools (h11's ``h11_max_incomplete_event_size`` bounds the size alone, on
a parser several times slower), and a send that waits for ever on a client that stopped reading.
None of it can be done in the application: a request whose head never ends never reaches it, and
only the transport can drop a connection without first flushing what is buffered for it (``close``
waits for a reader that never comes). So this subclass of uvicorn's protocol adds:

- ``header_timeout``: from the moment a connection opens, or the next request on it begins, its
  line and headers must be in within the timeout; otherwise 408 and the connection is closed.
  (Between requests, uvicorn's ``timeout_keep_alive`` closes an idle connection.)
- ``max_header_bytes`` and ``max_headers``: the request line's URL and each header's name and value
  (plus 4 bytes for ``": "`` and the line end), and the headers' number, counted as the parser
  reports them; over either, 431 and the connection is closed. The parser accumulates one header
  until it is whole, so the bytes fed to it while a head is incomplete are capped as well, and a
  single endless header is refused without being held.
- ``write_timeout``: a send that waits longer than that for the client to take what is already
  buffered (it stopped reading) aborts the connection and raises :class:`ClientTooSlow` out of the
  send, which ends the request (``app/http/request_guard.py``); a stream's relay then bills what it sent.

And it:

- makes the request's path canonical as soon as it is parsed (``app/http/paths.py``), so that every
  layer above sees ``/v1/chat/completions`` for ``/v1/chat/completions/`` or ``//v1/chat/completions``;
- closes a connection whose client is still sending a body its answer came before gently
  (``app/http/lingering.py``), so that the client reads the answer rather than a reset;
- answers what its parser cannot read (uvicorn: a plain-text 400) as every other refusal.

Refusals are written in the endpoint's error shape when the path is known (Messages' for
``/v1/messages*``, OpenAI's otherwise), as every other error of the gateway.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from app.errors import GatewayError, HeadersTooLarge, InvalidRequest, RequestTimeout
from app.http.lingering import LingeringTransport
from app.http.paths import make_canonical
from app.json import encode

log = logging.getLogger("tollgate.http")

#: What a head may carry beyond ``max_header_bytes`` as the parser counts it (the method, the HTTP
#: version, the line ends) before the raw bytes alone refuse it.
RAW_SLACK = 1024


class ClientTooSlow(BaseException):
    """The client took nothing of its answer for ``write_timeout`` seconds: its connection was cut.
    A BaseException, like a cancellation: nothing is left to answer, so no handler should try."""


class _HeadRefused(Exception):
    def __init__(self, error: GatewayError) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass(frozen=True)
class ConnectionLimits:
    max_header_bytes: int
    max_headers: int
    header_timeout: float
    write_timeout: float


class _Parser:
    """httptools' parser, letting a refusal raised in a callback out as itself: httptools wraps it in
    an ``HttpParserCallbackError``, which uvicorn would answer with a 400 and a warning."""

    def __init__(self, parser: httptools.HttpRequestParser) -> None:
        self._parser = parser

    def feed_data(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, _HeadRefused):
                raise exc.__context__ from None
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._parser, name)


class _TimedFlowControl(FlowControl):
    """uvicorn's flow control, whose wait for a full transport to drain ends after ``timeout``."""

    def __init__(self, transport: asyncio.Transport, timeout: float, on_timeout: Callable[[], None]) -> None:
        super().__init__(transport)
        self._timeout = timeout
        self._on_timeout = on_timeout

    async def drain(self) -> None:
        try:
            async with asyncio.timeout(self._timeout):
                await self._is_writable_event.wait()
        except TimeoutError:
            self._on_timeout()
            raise ClientTooSlow(
                f"cut off: the client read nothing of its answer for {self._timeout:g} seconds"
            ) from None


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        limits: ConnectionLimits,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.parser = _Parser(self.parser)  # type: ignore[assignment]
        self.limits = limits
        self._in_head = True  # a connection's first bytes are a head
        self._raw_head = 0  # bytes fed to the parser since the last head was complete
        self._head_bytes = 0  # the current message's URL and headers, as the parser reported them
        self._header_count = 0
        self._head_timer: asyncio.TimerHandle | None = None

    # The connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow = _TimedFlowControl(transport, self.limits.write_timeout, self._cut_off)
        self._closing = LingeringTransport(transport, self.loop, self._unread)
        self.transport = self._closing  # type: ignore[assignment]  # every close, uvicorn's too, goes through it
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        self._closing.lost()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        if self._closing.lingering:  # the server is stopping: it waits for no client's leftovers
            self._closing.end()
            return
        super().shutdown()

    def _unread(self) -> bool:
        """Whether the client may still be sending a request's body that its answer came before
        (a client whose head was refused is not waited for: it is the one being refused)."""
        return self.cycle is not None and self.cycle.more_body and not self._in_head

    def data_received(self, data: bytes) -> None:
        if self._closing.lingering:  # the answer is out; what the client still sends is dropped
            self._closing.dropped(len(data))
            return
        try:
            while data and not self.transport.is_closing():
                if self._in_head:  # feed no more of an unfinished head than it may have
                    room = self.limits.max_header_bytes + RAW_SLACK - self._raw_head
                    if room <= 0:
                        raise _HeadRefused(self._too_large("bytes"))
                    piece, data = data[:room], data[room:]
                    self._raw_head += len(piece)
                else:
                    piece, data = data, b""
                super().data_received(piece)
        except _HeadRefused as refusal:
            self._refuse(refusal.error)

    # Parser callbacks

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = self._header_count = 0
        if self._head_timer is None:
            self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        self._count(len(url), 0)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4, 1)  # trailers of a chunked body count too
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._raw_head = 0
        self._disarm_head_timer()
        super().on_headers_complete()  # starts the request's task, which has not run yet
        make_canonical(self.scope)  # type: ignore[arg-type]  # a TypedDict, read and written as the dict it is

    # Limits

    def _count(self, size: int, headers: int) -> None:
        self._head_bytes += size
        self._header_count += headers
        if self._head_bytes > self.limits.max_header_bytes:
            raise _HeadRefused(self._too_large("bytes"))
        if self._header_count > self.limits.max_headers:
            raise _HeadRefused(self._too_large("headers"))

    def _too_large(self, what: str) -> HeadersTooLarge:
        if what == "headers":
            return HeadersTooLarge(
                f"The request has more than {self.limits.max_headers} headers, the most this gateway takes."
            )
        return HeadersTooLarge(
            f"The request's line and headers are larger than this gateway takes: at most "
            f"{self.limits.max_header_bytes} bytes."
        )

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.limits.header_timeout, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._in_head and not self.transport.is_closing():
            self._refuse(
                RequestTimeout(
                    f"The request's line and headers did not arrive within {self.limits.header_timeout:g} seconds."
                )
            )

    def _refuse(self, error: GatewayError) -> None:
        """Answer a refused head (unless an earlier request on the connection is still answering:
        its answer must not be broken into) and close the connection."""
        log.info("refused a request from %s: %d %s", _peer(self.client), error.status, error.message)
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(self._error_response(error))
        self._disarm_head_timer()
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request its parser cannot read, in the gateway's JSON error shape
        rather than uvicorn's plain text."""
        log.info("refused a request from %s: %s", _peer(self.client), msg)
        self.transport.write(self._error_response(InvalidRequest(msg)))
        self._disarm_head_timer()
        self.transport.close()

    def _error_response(self, error: GatewayError) -> bytes:
        path = getattr(self, "url", b"")  # uvicorn's URL of the current request, once it began
        body = encode(error.anthropic_body() if path.startswith(b"/v1/messages") else error.openai_body())
        lines = [STATUS_LINE[error.status]]
        headers = [
            *self.server_state.default_headers,
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *((name.encode(), value.encode()) for name, value in error.response_headers().items()),
        ]
        lines += [name + b": " + value + b"\r\n" for name, value in headers]
        return b"".join(lines) + b"\r\n" + body

    def _cut_off(self) -> None:
        """The client stopped reading: drop the connection and what is buffered for it, now."""
        log.info(
            "cut off %s: it read nothing of its answer for %g seconds", _peer(self.client), self.limits.write_timeout
        )
        if self.cycle is not None:
            self.cycle.disconnected = True  # its later sends are dropped, its receive says disconnected
        self.transport.abort()


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "a client"
