"""The one pooled HTTP client a gateway process reaches its upstreams with: aiohttp's.

Measured by ``tollgate bench`` on the same machine in the same run: httpx's own pool (httpcore)
cost the bare proxy 1.05 ms of CPU per request and collapsed to 126 req/s at 64 connections; httpx
over an aiohttp transport cost 0.58 ms; aiohttp alone is cheaper still, because httpx's request and
response models (URL parsing, header normalisation, byte-stream wrappers) cost more than the network
code under them. The adapters need only a POST, a status, headers, the body whole or as it arrives, so
they use aiohttp directly, through this module.

aiohttp's failures become one :class:`TransportFailure` that says whether the upstream had begun to
answer and whether it was a timeout — all the error mapping needs (app/upstream/errors.py). A request
whose pooled connection turned out to be dead before any byte of an answer came is first sent once
more on a fresh connection (``app/upstream/connections.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import aiohttp
from yarl import URL

from app.upstream.connections import Attempt, WatchedConnector, unwatched, watched

log = logging.getLogger("tollgate.upstream")


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds: to connect, and to wait for each read (a stream may last longer in all)."""

    connect: float
    read: float


class TransportFailure(Exception):
    """The upstream could not be reached, or its answer broke off or timed out."""

    def __init__(self, description: str, *, timeout: bool) -> None:
        super().__init__(description)
        self.description = description
        self.timeout = timeout


def transport_failure(exc: BaseException) -> TransportFailure:
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return TransportFailure("connecting timed out", timeout=True)
    if isinstance(exc, (aiohttp.ServerTimeoutError, asyncio.TimeoutError)):
        return TransportFailure("timed out waiting for data", timeout=True)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return TransportFailure(f"could not connect ({exc.os_error.strerror or exc.os_error})", timeout=False)
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        return TransportFailure("the connection closed before the answer was complete", timeout=False)
    return TransportFailure(str(exc) or type(exc).__name__, timeout=False)


#: What a request may fail with while connecting, sending or reading.
FAILURES = (aiohttp.ClientError, asyncio.TimeoutError)


class UpstreamClient:
    """One aiohttp session per event loop (a session belongs to the loop it was made in)."""

    def __init__(self, *, max_connections: int = 1000, keepalive_expiry: float = 15.0) -> None:
        self._max_connections = max_connections
        self._keepalive_expiry = keepalive_expiry
        #: The pooled session, and the one whose every connection is new (closed after its request),
        #: for a request sent again because its pooled connection was dead.
        self._session: aiohttp.ClientSession | None = None
        self._fresh: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _sessions_here(self) -> tuple[aiohttp.ClientSession, aiohttp.ClientSession]:
        loop = asyncio.get_running_loop()
        session, fresh = self._session, self._fresh
        if session is None or fresh is None or session.closed or self._loop is not loop:
            pooled = WatchedConnector(
                limit=self._max_connections, limit_per_host=0, keepalive_timeout=self._keepalive_expiry
            )
            session = self._session = _session(pooled)
            fresh = self._fresh = _session(aiohttp.TCPConnector(limit=self._max_connections, force_close=True))
            self._loop = loop
        return session, fresh

    async def post(
        self,
        url: str | URL,
        content: bytes | Callable[[], AsyncIterator[bytes]],
        headers: dict[str, str],
        timeouts: Timeouts,
    ) -> aiohttp.ClientResponse:
        """POST and return once the status and headers came; the body is left to read. Sent once more,
        on a fresh connection, if it never reached the upstream or its pooled connection died before
        any byte of an answer came (``app/upstream/connections.py``); never more than once.
        ``content``: the body, or what reads a streamed body from its first byte (an upload, sent as
        it is read, under the ``content-length`` in ``headers``), called once per attempt."""
        pooled, fresh = self._sessions_here()
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeouts.connect, sock_read=timeouts.read)
        attempt = Attempt()
        token = watched(attempt)
        try:
            return await pooled.post(url, data=_data(content), headers=headers, allow_redirects=False, timeout=timeout)
        except FAILURES as exc:
            if not attempt.may_retry(exc):
                raise transport_failure(exc) from exc
            log.debug(
                "%s: %s before any answer on a %s connection; sending it again on a fresh one",
                url,
                transport_failure(exc).description,
                "reused" if attempt.reused else "refused",
            )
        finally:
            unwatched(token)
        try:
            return await fresh.post(url, data=_data(content), headers=headers, allow_redirects=False, timeout=timeout)
        except FAILURES as exc:
            raise transport_failure(exc) from exc

    async def aclose(self) -> None:
        for session in (self._session, self._fresh):
            if session is not None and not session.closed:
                with contextlib.suppress(RuntimeError):  # its loop is gone (a test's loop, closed)
                    await session.close()
        self._session = self._fresh = None


def _data(content: bytes | Callable[[], AsyncIterator[bytes]]) -> bytes | AsyncIterator[bytes]:
    return content if isinstance(content, bytes) else content()


def _session(connector: aiohttp.BaseConnector) -> aiohttp.ClientSession:
    # Nothing added behind the adapters' backs: no User-Agent, no Accept-Encoding (bodies are relayed
    # as they come), no total timeout (a long stream is fine while bytes keep coming).
    return aiohttp.ClientSession(
        connector=connector,
        skip_auto_headers=("User-Agent", "Accept-Encoding"),
        timeout=aiohttp.ClientTimeout(total=None),
    )


async def read_body(response: aiohttp.ClientResponse) -> bytes:
    try:
        return await response.read()
    except FAILURES as exc:
        raise transport_failure(exc) from exc


class Chunks:
    """The body as it arrives: each read's bytes, however they split the stream's events. An
    iterator object, not an async generator: one left before its end (a stream's last event came)
    needs no finalizer to be scheduled on the event loop."""

    __slots__ = ("_reads",)

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._reads = response.content.iter_any()

    def __aiter__(self) -> Chunks:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self._reads.__anext__()
        except FAILURES as exc:
            raise transport_failure(exc) from exc


def close(response: aiohttp.ClientResponse) -> None:
    """Done with a response: back to the pool if it was read to its end, else the connection is
    closed, so that an upstream still generating sees the hang-up (and stops)."""
    if response.content.at_eof():
        response.release()
    else:
        response.close()
