"""An OpenAI-compatible chat-completions provider over HTTP (OpenAI, vLLM, OpenRouter, …)."""

from __future__ import annotations

from typing import Any

import aiohttp

from app.errors import UpstreamFailure
from app.upstream.client import Timeouts, UpstreamClient
from app.upstream.http import HttpUpstream, SSEJsonStream


def _chat_stream(response: aiohttp.ClientResponse) -> SSEJsonStream:
    return SSEJsonStream(response, is_last=lambda chunk: False, error_of=lambda chunk: chunk.get("error"))


class OpenAIUpstream(HttpUpstream):
    """Speaks the chat wire: ``complete`` and ``open_stream`` take and give chat-completions JSON."""

    wire = "chat"

    def __init__(self, base_url: str, api_key: str | None, *, timeout: Timeouts, client: UpstreamClient) -> None:
        super().__init__({"authorization": f"Bearer {api_key}"} if api_key else {}, timeout=timeout, client=client)
        self._url = base_url.rstrip("/") + "/chat/completions"

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
        answer = await self._post_json(self._url, body, None)
        if not isinstance(answer.get("choices"), list):
            raise UpstreamFailure("The upstream provider sent an answer without choices.")
        return answer

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> SSEJsonStream:
        return _chat_stream(await self._post_stream(self._url, body, None))
