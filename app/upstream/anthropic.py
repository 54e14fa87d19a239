"""An Anthropic Messages provider over HTTP (``base_url`` without ``/v1``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec

from app.errors import UpstreamFailure
from app.upstream.errors import error_from_exception, error_from_stream_event
from app.upstream.http import HttpUpstream
from app.upstream.sse import iter_sse_data

DEFAULT_VERSION = "2023-06-01"
_decode = msgspec.json.decode


class _MessagesStream:
    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        try:
            async for data in iter_sse_data(self._response.aiter_lines()):
                try:
                    event = _decode(data)
                except msgspec.DecodeError:
                    raise UpstreamFailure("The upstream provider sent an invalid stream event.") from None
                if not isinstance(event, dict):
                    continue
                if event.get("type") == "error":
                    raise error_from_stream_event(event.get("error"))
                yield event
                if event.get("type") == "message_stop":
                    return
        except httpx.HTTPError as exc:
            raise error_from_exception(exc) from None
        finally:
            await self._response.aclose()

    async def aclose(self) -> None:
        await self._response.aclose()


class AnthropicUpstream(HttpUpstream):
    """Speaks the messages wire: ``complete`` and ``open_stream`` take and give Messages JSON.

    ``headers`` may carry the client's ``anthropic-version`` and ``anthropic-beta``, which are
    forwarded as they are.
    """

    wire = "messages"

    def __init__(self, base_url: str, api_key: str | None, *, timeout: httpx.Timeout, client: httpx.AsyncClient) -> None:
        headers = {"anthropic-version": DEFAULT_VERSION, **({"x-api-key": api_key} if api_key else {})}
        super().__init__(headers, timeout=timeout, client=client)
        root = base_url.rstrip("/")
        self._url = root + "/v1/messages"
        self._count_url = root + "/v1/messages/count_tokens"

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
        answer = await self._post_json(self._url, body, headers)
        if not isinstance(answer.get("content"), list):
            raise UpstreamFailure("The upstream provider sent a message without content.")
        return answer

    async def count_tokens(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> int:
        tokens = (await self._post_json(self._count_url, body, headers)).get("input_tokens")
        if not isinstance(tokens, int):
            raise UpstreamFailure("The upstream provider sent no token count.")
        return tokens

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> _MessagesStream:
        return _MessagesStream(await self._post_stream(self._url, body, headers))
