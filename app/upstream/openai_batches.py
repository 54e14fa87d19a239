"""OpenAI's Files and Batch APIs, as the gateway calls them upstream on a team's behalf: an upload
is sent from an iterator of chunks and an output file is read as a stream, never whole
(app/upstream/batch_http.py)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx

from app.upstream.batch_http import BatchHttp


class OpenAIBatches(BatchHttp):
    """One OpenAI deployment's ``/files`` and ``/batches`` (``base_url`` ends in ``/v1``)."""

    def __init__(self, base_url: str, api_key: str | None) -> None:
        super().__init__(base_url.rstrip("/"), {"authorization": f"Bearer {api_key}"} if api_key else {})

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
        async with self._stream(f"/files/{file_id}/content") as response:
            yield response
