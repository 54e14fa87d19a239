"""Azure OpenAI upstreams: OpenAI's wire at Azure's URLs, with Azure's authentication.

Requests go where the official ``openai.AzureOpenAI`` client sends them (``openai/lib/azure.py``):
chat completions and embeddings to ``{endpoint}/openai/deployments/{deployment}/...``, the Responses
API to ``{endpoint}/openai/responses`` (the deployment named by the body's ``model``), each with the
``api-version`` query. The bodies, answers, streams and usage are OpenAI's, so everything past the URL
and the key is the OpenAI adapter's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from app.upstream.base import Answer
from app.upstream.client import Timeouts, UpstreamClient
from app.upstream.entra_token import EntraToken
from app.upstream.http import HttpUpstream, SSEStream
from app.upstream.openai import OpenAIResponsesUpstream, OpenAIUpstream

#: The endpoints Azure serves under a deployment's URL; every other one under ``{endpoint}/openai``.
DEPLOYMENT_PATHS = frozenset({"/chat/completions", "/embeddings"})
#: ``auth`` values: the key sent as Azure's ``api-key`` header, or a Microsoft Entra access token as a bearer.
API_KEY, ENTRA = "api-key", "entra"


@dataclass(frozen=True, slots=True)
class AzureResource:
    """Where one deployment lives and how it is reached (a deployment's settings)."""

    #: The resource's endpoint, ``https://NAME.openai.azure.com`` (no ``/openai``).
    endpoint: str
    #: The ``api-version`` query every request carries.
    api_version: str
    #: ``api-key`` or ``entra``: how the credential is sent.
    auth: str = API_KEY


def azure_headers(credential: str | None, auth: str) -> dict[str, str]:
    """The authentication header for ``credential`` (none without one, as the other kinds)."""
    if not credential:
        return {}
    return {"authorization": f"Bearer {credential}"} if auth == ENTRA else {"api-key": credential}


class _AzureRouting(HttpUpstream):
    """The URLs of one Azure OpenAI resource, and its service principal's token when it has one;
    mixed into the OpenAI adapters in front of them."""

    _path: str
    _root = ""
    _query = ""
    _token: EntraToken | None = None

    def __init__(  # the resource's key or token, or its service principal's (``token``)
        self,
        resource: AzureResource,
        credential: str | None,
        *,
        timeout: Timeouts,
        client: UpstreamClient,
        token: EntraToken | None = None,
    ):
        HttpUpstream.__init__(self, azure_headers(credential, resource.auth), timeout=timeout, client=client)
        self._route(resource)
        self._token = token

    async def _signed(self, headers: dict[str, str] | None) -> dict[str, str] | None:
        """``headers`` with the service principal's bearer token (as they are without one)."""
        if self._token is None:
            return headers
        return {**(headers or {}), **await self._token.header()}

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        return await super().complete(body, await self._signed(headers))  # type: ignore[misc,no-any-return]

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> SSEStream:
        return await super().open_stream(body, await self._signed(headers))  # type: ignore[misc,no-any-return]

    async def aclose(self) -> None:
        if self._token is not None:
            await self._token.aclose()
        await super().aclose()

    def _route(self, resource: AzureResource) -> None:
        self._root = resource.endpoint.rstrip("/") + "/openai"
        self._base = self._root
        self._query = "?api-version=" + quote(resource.api_version, safe="")

    def url_for(self, path: str, body: dict[str, Any]) -> str:
        """``path``'s URL for a request whose ``model`` is the deployment's name."""
        if path in DEPLOYMENT_PATHS:
            deployment = quote(str(body.get("model") or ""), safe="")
            return f"{self._root}/deployments/{deployment}{path}{self._query}"
        return f"{self._root}{path}{self._query}"

    def _generation_url(self, body: dict[str, Any]) -> str:
        return self.url_for(self._path, body)

    async def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        """Embeddings, at the deployment's URL."""
        return await self._post_json(self.url_for(path, body), body, await self._signed(headers))


class AzureOpenAIUpstream(_AzureRouting, OpenAIUpstream):
    """The chat wire on an Azure OpenAI resource (``endpoint``: ``https://NAME.openai.azure.com``)."""


class AzureOpenAIResponsesUpstream(_AzureRouting, OpenAIResponsesUpstream):
    """The responses wire on an Azure OpenAI resource."""
