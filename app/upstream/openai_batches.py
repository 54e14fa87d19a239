"""OpenAI's Files and Batch APIs, as the gateway calls them upstream on a team's behalf.

A batch's traffic is a handful of calls a batch (an upload, a create, a poll every few seconds, the
output read once), nothing like the request path's, so it has a client of its own (httpx): an
upload is sent from an iterator of chunks and an output file is read as a stream, never whole.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx

from app.upstream.batch_errors import BatchUpstreamError

#: Seconds to wait for any one read from the upstream.
READ_TIMEOUT = 120.0


class OpenAIBatches:
    """One OpenAI deployment's ``/files`` and ``/batches`` (``base_url`` ends in ``/v1``)."""

    def __init__(self, base_url: str, api_key: str | None) -> None:
        self._base = base_url.rstrip("/")
        self._headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = httpx.Timeout(READ_TIMEOUT, connect=10.0)

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(headers=self._headers, timeout=self._timeout)

    async def upload(self, filename: str, chunks: Iterable[bytes], size: int) -> str:
        """Upload a batch input file (purpose ``batch``), sent from ``chunks``; returns its upstream id."""
        boundary = "tollgate-batch-upload"
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
            "Content-Type: application/jsonl\r\n\r\n"
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()

        async def body() -> AsyncIterator[bytes]:
            yield head
            for chunk in chunks:
                yield chunk
            yield tail

        headers = {
            "content-type": f"multipart/form-data; boundary={boundary}",
            "content-length": str(len(head) + size + len(tail)),
        }
        answer = await self._call("POST", "/files", content=body(), headers=headers)
        return str(answer["id"])

    async def create(self, input_file_id: str, endpoint: str, window: str, metadata: dict[str, str]) -> dict[str, Any]:
        body: dict[str, Any] = {"input_file_id": input_file_id, "endpoint": endpoint, "completion_window": window}
        if metadata:
            body["metadata"] = metadata
        return await self._call("POST", "/batches", json=body)

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        return await self._call("GET", f"/batches/{batch_id}")

    async def cancel(self, batch_id: str) -> dict[str, Any]:
        return await self._call("POST", f"/batches/{batch_id}/cancel")

    @contextlib.asynccontextmanager
    async def content(self, file_id: str) -> AsyncIterator[httpx.Response]:
        """The upstream file's content as a response to stream (``aiter_bytes``, ``aiter_lines``)."""
        async with self._client() as client, client.stream("GET", f"{self._base}/files/{file_id}/content") as response:
            if response.status_code != 200:
                await response.aread()
                raise BatchUpstreamError(response.status_code, response.text[:500])
            yield response

    async def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
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
