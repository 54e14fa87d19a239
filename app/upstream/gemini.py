"""Google's Gemini API (the Generative Language API) over HTTP, with an API key.

Requests go where Google's own SDK sends them: ``{base_url}/v1beta/models/{model}:generateContent``,
and ``:streamGenerateContent?alt=sse`` for a stream (Server-Sent Events of ``GenerateContentResponse``
chunks, ending when the connection does), the key in ``x-goog-api-key``. The gateway's body carries
the deployment's ``model`` and whether it is a ``stream`` (and, from a Gemini client, its ``alt``):
they go into the URL and are taken out of what is sent, since Google refuses fields it does not know.
Errors are Google's ``{"error": {"code", "message", "status"}}``, mapped like every provider's.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from app.errors import UpstreamFailure
from app.upstream.base import Answer, StreamEvent
from app.upstream.client import Timeouts, UpstreamClient
from app.upstream.http import HttpUpstream, SSEStream

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
#: What the gateway's body carries for the adapter, never sent.
_ROUTING = ("model", "stream", "alt")


def sendable(body: dict[str, Any]) -> dict[str, Any]:
    """The body Google gets: without the gateway's routing fields."""
    return {k: v for k, v in body.items() if k not in _ROUTING}


def model_path(model: str) -> str:
    """A model's path segment (``models/ID``; a tuned model's ``tunedModels/ID`` as it is)."""
    name = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
    return quote(name, safe="/")


class GeminiUpstream(HttpUpstream):
    """Speaks the gemini wire: ``complete`` and ``open_stream`` take and give Gemini JSON."""

    wire = "gemini"

    def __init__(self, base_url: str, api_key: str | None, *, timeout: Timeouts, client: UpstreamClient) -> None:
        super().__init__({"x-goog-api-key": api_key} if api_key else {}, timeout=timeout, client=client)
        self._base = (base_url or DEFAULT_BASE_URL).rstrip("/") + "/v1beta"

    def _url(self, body: dict[str, Any], method: str) -> str:
        return f"{self._base}/{model_path(str(body.get('model') or ''))}:{method}"

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        answer = await self._post_json(self._url(body, "generateContent"), sendable(body), headers)
        if answer.member("candidates") is None and answer.member("promptFeedback") is None:
            raise UpstreamFailure("The upstream provider sent an answer without candidates.")
        return answer

    async def count_tokens(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> int:
        tokens = (await self._post_json(self._url(body, "countTokens"), sendable(body), headers)).member("totalTokens")
        if not isinstance(tokens, int):
            raise UpstreamFailure("The upstream provider sent no token count.")
        return tokens

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> SSEStream:
        url = self._url(body, "streamGenerateContent") + "?alt=sse"
        response = await self._post_stream(url, sendable(body), headers)
        return self._sse(response, suspect=(b'"error"',), is_last=_never, error_of=_error_of)


def _never(event: StreamEvent) -> bool:
    return False  # Gemini's stream ends with its connection


def _error_of(event: StreamEvent) -> object | None:
    value = event.object() or {}
    error = value.get("error")
    return error if isinstance(error, dict) and "candidates" not in value else None
