"""An Anthropic Messages provider over HTTP (``base_url`` without ``/v1``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec

from app.errors import UpstreamFailure
from app.upstream.errors import error_from_exception, error_from_status, error_from_stream_event
from app.upstream.sse import iter_sse_data

DEFAULT_VERSION = "2023-06-01"
_encode = msgspec.json.encode
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


class AnthropicUpstream:
    """Speaks the messages wire: ``complete`` and ``open_stream`` take and give Messages JSON.

    ``headers`` may carry the client's ``anthropic-version`` and ``anthropic-beta``, which are
    forwarded as they are.
    """

    wire = "messages"

    def __init__(self, base_url: str, api_key: str | None, *, timeout: float, client: httpx.AsyncClient) -> None:
        root = base_url.rstrip("/")
        self._url = root + "/v1/messages"
        self._count_url = root + "/v1/messages/count_tokens"
        self._headers = {"content-type": "application/json", "anthropic-version": DEFAULT_VERSION}
        if api_key:
            self._headers["x-api-key"] = api_key
        self._timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self._client = client

    def _with(self, headers: dict[str, str] | None) -> dict[str, str]:
        return {**self._headers, **(headers or {})}

    async def _post(self, url: str, body: dict[str, Any], headers: dict[str, str] | None) -> dict[str, Any]:
        try:
            response = await self._client.post(url, content=_encode(body), headers=self._with(headers),
                                               timeout=self._timeout)
        except httpx.HTTPError as exc:
            raise error_from_exception(exc) from None
        if response.status_code >= 400:
            raise error_from_status(response.status_code, response.content, response.headers.get("retry-after"))
        try:
            answer = _decode(response.content)
        except msgspec.DecodeError:
            raise UpstreamFailure("The upstream provider sent invalid JSON.") from None
        if not isinstance(answer, dict):
            raise UpstreamFailure("The upstream provider sent an unexpected answer.")
        return answer

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
        answer = await self._post(self._url, body, headers)
        if not isinstance(answer.get("content"), list):
            raise UpstreamFailure("The upstream provider sent a message without content.")
        return answer

    async def count_tokens(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> int:
        answer = await self._post(self._count_url, body, headers)
        tokens = answer.get("input_tokens")
        if not isinstance(tokens, int):
            raise UpstreamFailure("The upstream provider sent no token count.")
        return tokens

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> _MessagesStream:
        request = self._client.build_request("POST", self._url, content=_encode(body),
                                             headers={**self._with(headers), "accept": "text/event-stream"},
                                             timeout=self._timeout)
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
        return _MessagesStream(response)

    async def aclose(self) -> None:
        """The shared HTTP client is closed by its owner."""
