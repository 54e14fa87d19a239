"""Google Vertex AI: Anthropic models through ``rawPredict`` and Gemini models through ``generateContent``.

Requests go where Google's and Anthropic's own SDKs send them, under
``{endpoint}/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/{model}``:
``:rawPredict`` and ``:streamRawPredict`` for Anthropic (the Messages body without ``model``, with
``anthropic_version: vertex-2023-10-16``; answers and streams are Anthropic's), ``:generateContent``
and ``:streamGenerateContent?alt=sse`` for Gemini (the Gemini API's bodies and answers). The endpoint is
the region's (``https://{region}-aiplatform.googleapis.com``; ``global``, ``us`` and ``eu`` have their
own), and every request carries a service account's access token (``app/upstream/google_token.py``).
Past the URL and the token, each publisher's wire is the one its own API speaks: an Anthropic
deployment on Vertex is routed as the ``messages`` wire, a Gemini one as the ``gemini`` wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from app.errors import UpstreamFailure
from app.upstream.anthropic import MESSAGES_SUSPECTS, is_message_stop, messages_error
from app.upstream.base import Answer
from app.upstream.client import Timeouts, UpstreamClient
from app.upstream.gemini import GeminiUpstream
from app.upstream.google_token import GoogleToken
from app.upstream.http import HttpUpstream, SSEStream

VERTEX_VERSION = "vertex-2023-10-16"
#: ``api`` values: the publisher, named by the wire it speaks.
MESSAGES, GEMINI = "messages", "gemini"


def default_endpoint(region: str) -> str:
    """The region's Vertex AI endpoint, as the official SDKs choose it."""
    special = {
        "global": "https://aiplatform.googleapis.com",
        "us": "https://aiplatform.us.rep.googleapis.com",
        "eu": "https://aiplatform.eu.rep.googleapis.com",
    }
    return special.get(region, f"https://{region}-aiplatform.googleapis.com")


@dataclass(frozen=True, slots=True)
class VertexPlace:
    """Where a deployment's model is served: the endpoint, the project and the region (location)."""

    endpoint: str
    project: str
    region: str

    def model_url(self, publisher: str, model: str, method: str) -> str:
        where = f"projects/{quote(self.project, safe='')}/locations/{quote(self.region, safe='')}"
        name = quote(model, safe="@.-_")
        return f"{self.endpoint.rstrip('/')}/v1/{where}/publishers/{publisher}/models/{name}:{method}"


class VertexAnthropicUpstream(HttpUpstream):
    """The ``messages`` wire at Vertex AI's ``rawPredict`` and ``streamRawPredict``."""

    wire = MESSAGES

    def __init__(self, place: VertexPlace, token: GoogleToken, *, timeout: Timeouts, client: UpstreamClient) -> None:
        super().__init__({}, timeout=timeout, client=client)
        self._place = place
        self._token = token

    def _request(self, body: dict[str, Any], method: str) -> tuple[str, dict[str, Any]]:
        sent = {key: value for key, value in body.items() if key != "model"}
        sent.setdefault("anthropic_version", VERTEX_VERSION)
        return self._place.model_url("anthropic", str(body.get("model") or ""), method), sent

    async def _headers_for(self, headers: dict[str, str] | None) -> dict[str, str]:
        betas = {"anthropic-beta": headers["anthropic-beta"]} if headers and headers.get("anthropic-beta") else {}
        return {**betas, **await self._token.header()}

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        url, sent = self._request(body, "rawPredict")
        answer = await self._post_json(url, sent, await self._headers_for(headers))
        if not answer.starts_with("content", b"["):
            raise UpstreamFailure("The upstream provider sent a message without content.")
        return answer

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> SSEStream:
        url, sent = self._request(body, "streamRawPredict")
        response = await self._post_stream(url, sent, await self._headers_for(headers))
        return self._sse(response, suspect=MESSAGES_SUSPECTS, is_last=is_message_stop, error_of=messages_error)

    async def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        raise UpstreamFailure("A Vertex AI deployment of an Anthropic model serves only messages.", status=400)


class VertexGeminiUpstream(GeminiUpstream):
    """The ``gemini`` wire at Vertex AI's ``generateContent`` and ``streamGenerateContent``."""

    def __init__(self, place: VertexPlace, token: GoogleToken, *, timeout: Timeouts, client: UpstreamClient) -> None:
        super().__init__(place.endpoint, None, timeout=timeout, client=client)
        self._place = place
        self._token = token

    def _url(self, body: dict[str, Any], method: str) -> str:
        return self._place.model_url("google", str(body.get("model") or "").removeprefix("models/"), method)

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        return await super().complete(body, await self._token.header())

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> SSEStream:
        return await super().open_stream(body, await self._token.header())
