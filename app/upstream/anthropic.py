"""An Anthropic Messages provider over HTTP (``base_url`` without ``/v1``)."""

from __future__ import annotations

from typing import Any

from app.errors import UpstreamFailure
from app.upstream.base import Answer, StreamEvent
from app.upstream.client import Timeouts, UpstreamClient
from app.upstream.http import HttpUpstream, SSEStream

DEFAULT_VERSION = "2023-06-01"


class AnthropicUpstream(HttpUpstream):
    """Speaks the messages wire: ``complete`` and ``open_stream`` take and give Messages JSON.

    ``headers`` may carry the client's ``anthropic-version`` and ``anthropic-beta``, which are
    forwarded as they are.
    """

    wire = "messages"

    def __init__(self, base_url: str, api_key: str | None, *, timeout: Timeouts, client: UpstreamClient) -> None:
        headers = {"anthropic-version": DEFAULT_VERSION, **({"x-api-key": api_key} if api_key else {})}
        super().__init__(headers, timeout=timeout, client=client)
        root = self._base = base_url.rstrip("/")
        self._url = root + "/v1/messages"
        self._count_url = root + "/v1/messages/count_tokens"

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        answer = await self._post_json(self._url, body, headers)
        if not answer.starts_with("content", b"["):
            raise UpstreamFailure("The upstream provider sent a message without content.")
        return answer

    async def count_tokens(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> int:
        tokens = (await self._post_json(self._count_url, body, headers)).member("input_tokens")
        if not isinstance(tokens, int):
            raise UpstreamFailure("The upstream provider sent no token count.")
        return tokens

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> SSEStream:
        response = await self._post_stream(self._url, body, headers)
        return self._sse(response, suspect=MESSAGES_SUSPECTS, is_last=is_message_stop, error_of=messages_error)


#: What a Messages stream's end or error is written with: only events holding one are decoded to look.
MESSAGES_SUSPECTS = (b'"error"', b"message_stop")


def is_message_stop(event: StreamEvent) -> bool:
    return (event.object() or {}).get("type") == "message_stop"


def messages_error(event: StreamEvent) -> object | None:
    value = event.object() or {}
    return value.get("error") if value.get("type") == "error" else None
