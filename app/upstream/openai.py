"""An OpenAI-compatible chat-completions provider over HTTP (OpenAI, vLLM, OpenRouter, …)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec

from app.errors import UpstreamFailure
from app.upstream.errors import error_from_exception, error_from_stream_event
from app.upstream.http import HttpUpstream
from app.upstream.sse import iter_sse_data

_decode = msgspec.json.decode


class _SSEChatStream:
    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        try:
            async for data in iter_sse_data(self._response.aiter_lines()):
                if data == "[DONE]":
                    return
                try:
                    chunk = _decode(data)
                except msgspec.DecodeError:
                    raise UpstreamFailure("The upstream provider sent an invalid stream chunk.") from None
                if isinstance(chunk, dict) and chunk.get("error"):
                    raise error_from_stream_event(chunk["error"])
                yield chunk
        except httpx.HTTPError as exc:
            raise error_from_exception(exc) from None
        finally:
            await self._response.aclose()

    async def aclose(self) -> None:
        await self._response.aclose()


class OpenAIUpstream(HttpUpstream):
    """Speaks the chat wire: ``complete`` and ``open_stream`` take and give chat-completions JSON."""

    wire = "chat"

    def __init__(self, base_url: str, api_key: str | None, *, timeout: httpx.Timeout, client: httpx.AsyncClient) -> None:
        super().__init__({"authorization": f"Bearer {api_key}"} if api_key else {}, timeout=timeout, client=client)
        self._url = base_url.rstrip("/") + "/chat/completions"

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
        answer = await self._post_json(self._url, body, None)
        if not isinstance(answer.get("choices"), list):
            raise UpstreamFailure("The upstream provider sent an answer without choices.")
        return answer

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> _SSEChatStream:
        return _SSEChatStream(await self._post_stream(self._url, body, None))
