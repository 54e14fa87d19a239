"""An OpenAI-compatible chat-completions provider over HTTP (OpenAI, vLLM, OpenRouter, …)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec

from app.errors import UpstreamFailure
from app.upstream.errors import error_from_exception, error_from_status, error_from_stream_event
from app.upstream.sse import iter_sse_data

_encode = msgspec.json.encode
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


class OpenAIUpstream:
    """Speaks the chat wire: ``complete`` and ``open_stream`` take and give chat-completions JSON."""

    wire = "chat"

    def __init__(self, base_url: str, api_key: str | None, *, timeout: float, client: httpx.AsyncClient) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._headers = {"content-type": "application/json", "accept": "application/json"}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self._client = client

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
        try:
            response = await self._client.post(
                self._url, content=_encode(body), headers=self._headers, timeout=self._timeout
            )
        except httpx.HTTPError as exc:
            raise error_from_exception(exc) from None
        if response.status_code >= 400:
            raise error_from_status(response.status_code, response.content, response.headers.get("retry-after"))
        try:
            answer = _decode(response.content)
        except msgspec.DecodeError:
            raise UpstreamFailure("The upstream provider sent invalid JSON.") from None
        if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list):
            raise UpstreamFailure("The upstream provider sent an answer without choices.")
        return answer

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> _SSEChatStream:
        request = self._client.build_request(
            "POST",
            self._url,
            content=_encode(body),
            headers={**self._headers, "accept": "text/event-stream"},
            timeout=self._timeout,
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise error_from_exception(exc) from None
        if response.status_code >= 400:
            try:
                content = await response.aread()
            except httpx.HTTPError:
                content = b""
            await response.aclose()
            raise error_from_status(response.status_code, content, response.headers.get("retry-after"))
        return _SSEChatStream(response)

    async def aclose(self) -> None:
        """The shared HTTP client is closed by its owner."""
