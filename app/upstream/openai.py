"""OpenAI upstreams over HTTP: chat completions (OpenAI, vLLM, OpenRouter, …) and the Responses API."""

from __future__ import annotations

from typing import Any

from app.errors import UpstreamFailure
from app.upstream.base import Answer, StreamEvent
from app.upstream.client import Timeouts, UpstreamClient
from app.upstream.http import HttpUpstream, SSEStream

#: The Responses API's events that end a stream (``response.failed`` ends it with an error).
_LAST = ("response.completed", "response.incomplete", "response.failed")
#: What an event that ends a stream, or reports an error, cannot be written without.
_RESPONSES_SUSPECT = (b'"error"', *(kind.encode() for kind in _LAST))


def _responses_error(event: StreamEvent) -> object | None:
    value = event.object() or {}
    if value.get("type") == "error":
        return value
    response = value.get("response")
    if value.get("type") == "response.failed" and isinstance(response, dict):
        return response.get("error") or {"message": "the response failed"}
    return None


def _responses_last(event: StreamEvent) -> bool:
    return (event.object() or {}).get("type") in _LAST


def _chat_error(event: StreamEvent) -> object | None:
    return (event.object() or {}).get("error")


class OpenAIUpstream(HttpUpstream):
    """Speaks the chat wire: ``complete`` and ``open_stream`` take and give chat-completions JSON.

    ``headers`` may carry the client's ``openai-beta``, forwarded as it is."""

    wire = "chat"
    _path = "/chat/completions"

    def __init__(self, base_url: str, api_key: str | None, *, timeout: Timeouts, client: UpstreamClient) -> None:
        super().__init__({"authorization": f"Bearer {api_key}"} if api_key else {}, timeout=timeout, client=client)
        self._base = base_url.rstrip("/")
        self._url = self._base + self._path

    def _generation_url(self, body: dict[str, Any]) -> str:
        """Where a generation request goes (Azure's deployments put the model's name in it)."""
        return self._url

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        answer = await self._post_json(self._generation_url(body), body, headers)
        if not answer.starts_with("choices", b"["):
            raise UpstreamFailure("The upstream provider sent an answer without choices.")
        return answer

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> SSEStream:
        response = await self._post_stream(self._generation_url(body), body, headers)
        return self._sse(response, suspect=(b'"error"',), is_last=lambda event: False, error_of=_chat_error)


class OpenAIResponsesUpstream(OpenAIUpstream):
    """Speaks the responses wire: the OpenAI Responses API (``base_url`` ending in ``/v1``)."""

    wire = "responses"
    _path = "/responses"

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        answer = await self._post_json(self._generation_url(body), body, headers)
        if not answer.starts_with("output", b"["):
            raise UpstreamFailure("The upstream provider sent a response without output.")
        return answer

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> SSEStream:
        response = await self._post_stream(self._generation_url(body), body, headers)
        return self._sse(response, suspect=_RESPONSES_SUSPECT, is_last=_responses_last, error_of=_responses_error)
