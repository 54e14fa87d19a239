"""The HTTP half every provider adapter shares: one pooled client, JSON posts, streamed posts,
and failures mapped the same way for every provider."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import msgspec
from yarl import URL

from app.errors import GatewayError
from app.upstream.base import Answer, StreamEvent
from app.upstream.client import Chunks, Timeouts, TransportFailure, UpstreamClient, close, read_body
from app.upstream.errors import error_from_exception, error_from_status, error_from_stream_event
from app.upstream.media import ByteStream, RawAnswer, ResponseBytes, Upload, read_raw
from app.upstream.sse import SSEParser

_encode = msgspec.json.encode
_decode = msgspec.json.decode


class HttpUpstream:
    #: The wire protocol this provider speaks: ``chat``, ``responses`` or ``messages``.
    wire: str
    #: The provider's URL the endpoints' paths follow (``https://api.openai.com/v1``); set by each adapter.
    _base: str = ""

    def __init__(self, headers: dict[str, str], *, timeout: Timeouts, client: UpstreamClient) -> None:
        self._headers = {"content-type": "application/json", **headers}
        self._timeout = timeout
        self._client = client

    def _with(self, headers: dict[str, str] | None) -> dict[str, str]:
        return {**self._headers, **headers} if headers else self._headers

    def _upload_headers(self, upload: Upload, headers: dict[str, str] | None) -> dict[str, str]:
        """An upload's headers: its multipart type and exact length over the provider's own."""
        return {**self._with(headers), "content-type": upload.content_type, "content-length": str(upload.length)}

    async def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        """A JSON POST to one of the provider's endpoints other than generation (``/embeddings``
        under an OpenAI ``base_url``), its whole answer read as it came (raises ``GatewayError``)."""
        return await self._post_json(self._base + path, body, headers)

    async def _post_json(self, url: str | URL, body: dict[str, Any] | bytes, headers: dict[str, str] | None) -> Answer:
        response = await self._send(url, body, self._with(headers))
        try:
            content = await read_body(response)
        except TransportFailure as exc:
            raise error_from_exception(exc, answering=True) from None
        finally:
            close(response)
        return Answer(content)

    async def _post_stream(
        self, url: str, body: dict[str, Any], headers: dict[str, str] | None
    ) -> aiohttp.ClientResponse:
        """Start a streamed POST; an error status is raised before any of the body is read."""
        return await self._send(url, body, {**self._with(headers), "accept": "text/event-stream"})

    async def post_upload(self, path: str, upload: Upload, headers: dict[str, str] | None = None) -> RawAnswer:
        """A multipart upload to one of the provider's endpoints (``/audio/transcriptions``), sent as
        it is read; its whole answer as bytes, whatever its type (JSON, text, subtitles)."""
        return await read_raw(await self._send(self._base + path, upload.chunks, self._upload_headers(upload, headers)))

    async def open_bytes(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> ByteStream:
        """A JSON POST whose answer is relayed as bytes as they come (``/audio/speech``); an error
        status is raised before any of it is read."""
        return ResponseBytes(await self._send(self._base + path, body, self._with(headers)))

    async def open_upload(self, path: str, upload: Upload, headers: dict[str, str] | None = None) -> ByteStream:
        """A multipart upload whose answer is relayed as bytes as they come (a streamed transcription's
        events); an error status is raised before any of it is read."""
        return ResponseBytes(await self._send(self._base + path, upload.chunks, self._upload_headers(upload, headers)))

    async def _send(
        self,
        url: str | URL,
        body: dict[str, Any] | bytes | Callable[[], AsyncIterator[bytes]],
        headers: dict[str, str],
    ) -> aiohttp.ClientResponse:
        """POST (``body``: JSON to encode, bytes as they are, or an upload) and wait for the status only,
        so that a failure before the upstream began answering (which another deployment may retry) is
        told apart from one while it answered (never retried). An error status is raised, its body read
        for the upstream's message; else the body is unread."""
        try:
            content = _encode(body) if isinstance(body, dict) else body
            response = await self._client.post(url, content, headers, self._timeout)
        except TransportFailure as exc:
            raise error_from_exception(exc) from None
        if response.status >= 400:
            try:
                content = await read_body(response)
            except TransportFailure:
                content = b""
            close(response)
            error = error_from_status(response.status, content, response.headers.get("retry-after"))
            error.upstream_wire, error.upstream_status, error.upstream_body = self.wire, response.status, content
            raise error
        return response

    def _sse(
        self,
        response: aiohttp.ClientResponse,
        *,
        suspect: tuple[bytes, ...],
        is_last: Callable[[StreamEvent], bool],
        error_of: Callable[[StreamEvent], object | None],
    ) -> SSEStream:
        return SSEStream(response, wire=self.wire, suspect=suspect, is_last=is_last, error_of=error_of)

    async def aclose(self) -> None:
        """The shared HTTP client is closed by its owner."""


class SSEStream:
    """An upstream's SSE stream as batches of events (those each read completed), until its end:
    ``[DONE]`` (OpenAI chat) or a final event (Anthropic's ``message_stop``, the Responses API's
    ``response.completed``). A stream error event, or a broken connection, raises — after the
    events before it were handed on.

    ``is_last`` and ``error_of`` are asked only about an event whose bytes contain one of
    ``suspect`` (text the end or an error is written with: ``"error"``, the final event's type), so
    that most events are never decoded here."""

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        *,
        wire: str,
        suspect: tuple[bytes, ...],
        is_last: Callable[[StreamEvent], bool],
        error_of: Callable[[StreamEvent], object | None],
    ) -> None:
        self._response = response
        self._wire = wire
        self._suspects = suspect
        self._is_last = is_last
        self._error_of = error_of

    async def __aiter__(self) -> AsyncIterator[list[StreamEvent]]:
        parser = SSEParser()
        try:
            async for chunk in Chunks(self._response):
                batch, end = self._events(parser.feed(chunk))
                if batch:
                    yield batch
                if isinstance(end, GatewayError):
                    raise end
                if end:
                    return
            batch, end = self._events(parser.end())
            if batch:
                yield batch
            if isinstance(end, GatewayError):
                raise end
        except TransportFailure as exc:
            raise error_from_exception(exc, answering=True) from None
        finally:
            close(self._response)

    def _events(self, found: list[bytes]) -> tuple[list[StreamEvent], bool | GatewayError]:
        """The events of one read up to the stream's end, and whether it ended (or how it failed:
        the failure is raised once the events before it were yielded)."""
        end = False
        if b"[DONE]" in found:
            found, end = found[: found.index(b"[DONE]")], True
        suspects = self._suspects
        joined = b"\n".join(found)
        if not any(text in joined for text in suspects):
            return [StreamEvent(data) for data in found], end  # the common case: nothing to look at
        batch: list[StreamEvent] = []
        for data in found:
            event = StreamEvent(data)
            if not any(text in data for text in suspects):
                batch.append(event)
                continue
            try:
                error = self._error_of(event)
                if error:
                    failure = error_from_stream_event(error)
                    failure.upstream_wire, failure.upstream_event = self._wire, event.json()
                    return batch, failure
                batch.append(event)
                if self._is_last(event):
                    return batch, True
            except GatewayError as exc:  # an event that is not JSON
                return batch, exc
        return batch, end

    def close(self) -> None:
        close(self._response)
