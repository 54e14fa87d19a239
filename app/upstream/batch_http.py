"""What the providers' batch APIs share as the gateway calls them (app/upstream/openai_batches.py,
anthropic_batches.py): a batch's traffic is a handful of calls (an upload, a create, a poll every few
seconds, the output read once), nothing like the request path's, so it has a client of its own
(httpx), one per call; JSON answers checked, files read as a stream, never whole. The clients share
one TLS context: httpx builds one per client otherwise (certifi's bundle parsed, about 26 ms of CPU
on the event loop each time)."""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpx

from app.upstream.batch_errors import BatchUpstreamError

#: Seconds to wait for any one read from the upstream.
READ_TIMEOUT = 120.0


@functools.cache
def _tls() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's roots, or ``SSL_CERT_FILE``), built once a process."""
    return httpx.create_ssl_context()


class BatchHttp:
    """Calls under ``base`` with ``headers`` (the deployment's key, its API version)."""

    def __init__(self, base: str, headers: dict[str, str]) -> None:
        self._base = base
        self._headers = headers
        self._timeout = httpx.Timeout(READ_TIMEOUT, connect=10.0)

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(headers=self._headers, timeout=self._timeout, verify=_tls())

    async def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """The JSON object the upstream answers ``method`` ``path`` with; anything else is a BatchUpstreamError."""
        try:
            async with self._client() as client:
                response = await client.request(method, f"{self._base}{path}", **kwargs)
        except httpx.HTTPError as exc:
            raise BatchUpstreamError(0, f"{type(exc).__name__}: {exc}") from exc
        if response.status_code >= 300:
            raise BatchUpstreamError(response.status_code, response.text[:500])
        try:
            answer = response.json()
        except ValueError as exc:
            raise BatchUpstreamError(response.status_code, "the upstream's answer is not JSON") from exc
        if not isinstance(answer, dict):
            raise BatchUpstreamError(response.status_code, "the upstream's answer is not a JSON object")
        return answer

    @contextlib.asynccontextmanager
    async def _stream(self, path: str) -> AsyncIterator[httpx.Response]:
        """``GET path`` as a response to stream (``aiter_bytes``, ``aiter_lines``), once it answered 200."""
        async with self._client() as client, client.stream("GET", f"{self._base}{path}") as response:
            if response.status_code != 200:
                await response.aread()
                raise BatchUpstreamError(response.status_code, response.text[:500])
            yield response
