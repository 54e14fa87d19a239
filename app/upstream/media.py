"""Requests and answers that are not JSON: a multipart upload sent as a stream, an answer read as
bytes whatever its type, and an answer relayed as bytes as they come (OpenAI's audio endpoints).

An upload (:class:`Upload`) is its content type, its exact length and a way to read its body from the
first byte, as often as needed: the pooled client sends a request once more on a fresh connection
when the pooled one was dead, and a model's deployments are tried in turn, each with its own model
name in the form. The body is never joined in memory: aiohttp sends the chunks as they are read,
under the ``content-length`` given (no chunked encoding, which some providers refuse for uploads).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol

import aiohttp

from app.upstream.client import Chunks, TransportFailure, close, read_body
from app.upstream.errors import error_from_exception


@dataclass(frozen=True, slots=True)
class Upload:
    """A request body sent as a stream: ``chunks()`` reads it from its first byte, anew each call."""

    content_type: str
    length: int
    chunks: Callable[[], AsyncIterator[bytes]]


@dataclass(frozen=True, slots=True)
class RawAnswer:
    """An upstream's whole answer as bytes, with its content type (JSON, text, subtitles)."""

    content_type: str
    content: bytes

    @property
    def is_json(self) -> bool:
        return self.content_type.split(";")[0].strip().lower() == "application/json"


async def read_raw(response: aiohttp.ClientResponse) -> RawAnswer:
    """The whole body of a response whose status was fine (a transcript: small)."""
    try:
        content = await read_body(response)
    except TransportFailure as exc:
        raise error_from_exception(exc, answering=True) from None
    finally:
        close(response)
    return RawAnswer(response.headers.get("content-type", "application/octet-stream"), content)


class ByteStream(Protocol):
    """An answer's body as it arrives (speech audio), for the relay to pass on chunk by chunk; a
    broken connection raises the upstream's failure (``GatewayError``) after the chunks before it."""

    content_type: str

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    def close(self) -> None: ...


class ResponseBytes:
    """A :class:`ByteStream` of an HTTP upstream's response."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.content_type = response.headers.get("content-type", "application/octet-stream")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in Chunks(self._response):
                yield chunk
        except TransportFailure as exc:
            raise error_from_exception(exc, answering=True) from None
        finally:
            close(self._response)

    def close(self) -> None:
        close(self._response)
