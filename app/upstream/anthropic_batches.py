"""Anthropic's Message Batches API, as the gateway calls it upstream on a team's behalf.

The requests go up as one JSON body sent from the spool the gateway wrote them to (never whole in
memory); the results (JSONL, as large as the batch) are read as a stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx

from app.upstream.batch_http import BatchHttp

#: The API version the gateway speaks to Anthropic's batches.
ANTHROPIC_VERSION = "2023-06-01"


class AnthropicBatches(BatchHttp):
    """One Anthropic deployment's ``/v1/messages/batches`` (``base_url`` without ``/v1``)."""

    def __init__(self, base_url: str, api_key: str | None) -> None:
        headers = {"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": api_key} if api_key else {})}
        super().__init__(base_url.rstrip("/") + "/v1/messages/batches", headers)

    async def create(self, requests: Iterable[bytes], size: int) -> dict[str, Any]:
        """Create the batch from ``requests``: its items' JSON, comma-separated, ``size`` bytes in all."""
        head, tail = b'{"requests":[', b"]}"

        async def body() -> AsyncIterator[bytes]:
            yield head
            for chunk in requests:
                yield chunk
            yield tail

        headers = {"content-type": "application/json", "content-length": str(len(head) + size + len(tail))}
        return await self._call("POST", "", content=body(), headers=headers)

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        return await self._call("GET", f"/{batch_id}")

    async def cancel(self, batch_id: str) -> dict[str, Any]:
        return await self._call("POST", f"/{batch_id}/cancel")

    @contextlib.asynccontextmanager
    async def results(self, batch_id: str) -> AsyncIterator[httpx.Response]:
        """The ended batch's results (JSONL) as a response to stream."""
        async with self._stream(f"/{batch_id}/results") as response:
            yield response
