"""httpx's API over aiohttp's connection pool.

The adapters speak httpx (requests, streamed responses, ``httpx.HTTPError``), but httpcore's pool
costs about 1 ms of CPU per request and degrades badly with many requests in flight: the benchmark's
bare proxy served 126 requests/s at 64 concurrent connections with httpcore, 2,000 with aiohttp, on
the same machine in the same run. So httpx's client is kept and its transport is aiohttp's.

aiohttp's failures become the httpx exceptions the adapters already map to gateway errors (a refused
connection is a ``ConnectError``, a connection cut while answering a ``ReadError``, a timeout waiting
for bytes a ``ReadTimeout``), so a 502 stays a 502 and a 504 a 504 whichever transport is underneath.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import aiohttp
import httpx

#: aiohttp adds these on its own unless told not to; httpx already set what the request needs.
_SKIPPED_AUTO_HEADERS = ("User-Agent", "Accept-Encoding", "Accept", "Content-Type")


@contextlib.contextmanager
def _as_httpx_errors(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except aiohttp.ConnectionTimeoutError as exc:
        raise httpx.ConnectTimeout(str(exc) or "connect timed out", request=request) from exc
    except (aiohttp.ServerTimeoutError, asyncio.TimeoutError) as exc:
        raise httpx.ReadTimeout(str(exc) or "read timed out", request=request) from exc
    except aiohttp.ClientConnectorError as exc:
        raise httpx.ConnectError(str(exc), request=request) from exc
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError) as exc:  # httpcore's names for them
        raise httpx.RemoteProtocolError(str(exc) or "server disconnected", request=request) from exc
    except (aiohttp.ClientOSError, aiohttp.ClientConnectionError) as exc:
        raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
    except aiohttp.ClientError as exc:
        raise httpx.TransportError(str(exc) or type(exc).__name__, request=request) from exc


class _ResponseStream(httpx.AsyncByteStream):
    """The body as it arrives (``iter_any``: no waiting to fill a chunk, which would delay SSE events)."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx_errors(self._request):
            async for chunk in self._response.content.iter_any():
                yield chunk

    async def aclose(self) -> None:
        # A body not read to its end leaves the connection mid-answer: close it, so that an upstream
        # still generating sees the hang-up (and stops), rather than returning it to the pool.
        if self._response.content.at_eof():
            self._response.release()
        else:
            self._response.close()


class AiohttpTransport(httpx.AsyncBaseTransport):
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
            session = self._session = aiohttp.ClientSession(
                connector=connector, skip_auto_headers=_SKIPPED_AUTO_HEADERS, auto_decompress=False,
                timeout=aiohttp.ClientTimeout(total=None))
            self._loop = loop
        return session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout = request.extensions.get("timeout", {})
        with _as_httpx_errors(request):
            response = await self._session_here().request(
                request.method, str(request.url), headers=request.headers.multi_items(), data=request.content or None,
                allow_redirects=False, compress=None,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout.get("connect"),
                                              sock_read=timeout.get("read"), connect=timeout.get("pool")),
            )
        return httpx.Response(status_code=response.status, headers=response.raw_headers,
                              stream=_ResponseStream(response, request), request=request,
                              extensions={"http_version": b"HTTP/1.1"})

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            with contextlib.suppress(RuntimeError):  # its loop may be gone (a test's loop, closed)
                await self._session.close()
        self._session = None
