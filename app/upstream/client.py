"""The one pooled HTTP client a gateway process reaches its upstreams with: aiohttp's.

Measured by ``tollgate bench`` on the same machine in the same run: httpx's own pool (httpcore)
cost the bare proxy 1.05 ms of CPU per request and collapsed to 126 req/s at 64 connections; httpx
over an aiohttp transport cost 0.58 ms; aiohttp alone is cheaper still, because httpx's request and
response models (URL parsing, header normalisation, byte-stream wrappers) cost more than the network
code under them. The adapters need only a POST, a status, headers, the body whole or as it arrives, so
they use aiohttp directly, through this module.

aiohttp's failures become one :class:`TransportFailure` that says whether the upstream had begun to
answer and whether it was a timeout — all the error mapping needs (app/upstream/errors.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import aiohttp


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
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_here(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._session
        if session is None or session.closed or self._loop is not loop:
            connector = aiohttp.TCPConnector(limit=self._max_connections, limit_per_host=0,
                                             keepalive_timeout=self._keepalive_expiry)
            # Nothing added behind the adapters' backs: no User-Agent, no Accept-Encoding (bodies are
            # relayed as they come), no total timeout (a long stream is fine while bytes keep coming).
            session = self._session = aiohttp.ClientSession(
                connector=connector, skip_auto_headers=("User-Agent", "Accept-Encoding"),
                timeout=aiohttp.ClientTimeout(total=None))
            self._loop = loop
        return session

    async def post(
        self, url: str, content: bytes, headers: dict[str, str], timeouts: Timeouts
    ) -> aiohttp.ClientResponse:
        """POST and return once the status and headers came; the body is left to read."""
        try:
            return await self._session_here().post(
                url, data=content, headers=headers, allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeouts.connect, sock_read=timeouts.read))
        except FAILURES as exc:
            raise transport_failure(exc) from exc

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            with contextlib.suppress(RuntimeError):  # its loop is gone (a test's loop, closed)
                await self._session.close()
        self._session = None


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
