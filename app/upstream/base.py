"""What every upstream adapter provides: its wire protocol, requests as JSON dicts, answers as JSON text
read once (:class:`Answer`), streams as events (:class:`StreamEvent`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

import msgspec

from app.errors import UpstreamFailure
from app.upstream.media import ByteStream, RawAnswer, Upload

_decode = msgspec.json.decode


class StreamEvent:
    """One event of a streamed answer: its data, the JSON text exactly as the upstream sent it,
    decoded only when someone asks (and then once). A relay that passes the event on unchanged
    never decodes it whole."""

    __slots__ = ("_value", "data", "utf8")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._value: Any = _UNREAD
        #: Whether ``data`` is valid UTF-8 (known once decoded): only then may it be relayed as it came.
        self.utf8 = True

    def json(self) -> Any:
        """The decoded JSON (invalid UTF-8 replaced, as a text reader would); an event that is not
        JSON is the upstream's failure."""
        if self._value is _UNREAD:
            try:
                self._value = _decode(self.data)
            except (msgspec.DecodeError, UnicodeDecodeError):
                self.utf8 = False
                try:
                    self._value = _decode(self.data.decode("utf-8", "replace"))
                except msgspec.DecodeError:
                    raise UpstreamFailure("The upstream provider sent an invalid stream event.") from None
        return self._value

    def object(self) -> dict[str, Any] | None:
        """The event as a JSON object; None for any other JSON (such events are skipped)."""
        value = self.json()
        return value if isinstance(value, dict) else None

    @classmethod
    def of(cls, value: dict[str, Any]) -> StreamEvent:
        """An event made here (not read from a wire), already decoded."""
        event = cls(msgspec.json.encode(value))
        event._value = value
        return event


_UNREAD = object()
_read_members = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode


class Answer:
    """An upstream's whole answer (a plain request): its JSON text as the upstream sent it, read
    once into its top-level members, each kept as its raw JSON text (checked, not turned into
    objects), and decoded whole only when someone asks. A pass-through answer is written back
    from the members, so what Tollgate does not change is never decoded or encoded again."""

    __slots__ = ("_content", "_decoded", "_value", "members")

    def __init__(self, content: bytes) -> None:
        """Read ``content``; not a JSON object (or not UTF-8) is the upstream's failure."""
        try:
            self.members = _read_members(content)
            if not content.isascii():
                content.decode()  # the members' strings are checked only when decoded
        except (msgspec.DecodeError, UnicodeDecodeError):
            raise UpstreamFailure("The upstream provider sent invalid JSON.") from None
        except msgspec.ValidationError:
            raise UpstreamFailure("The upstream provider sent an unexpected answer.") from None
        self._content = content
        self._value: Any = _UNREAD
        self._decoded: dict[str, Any] = {}

    def json(self) -> dict[str, Any]:
        """The whole answer, decoded."""
        if self._value is _UNREAD:
            self._value = _decode(self._content)
        return self._value  # type: ignore[no-any-return]

    def member(self, name: str) -> Any:
        """One top-level member, decoded (None if there is none)."""
        if name not in self._decoded:
            raw = self.members.get(name)
            self._decoded[name] = None if raw is None else _decode(raw)
        return self._decoded[name]

    def starts_with(self, name: str, char: bytes) -> bool:
        """Whether the member ``name`` is there and its JSON text begins with ``char`` (``b"["``: an
        array), read without decoding it."""
        raw = self.members.get(name)
        return raw is not None and memoryview(raw)[:1] == char

    @classmethod
    def of(cls, value: dict[str, Any]) -> Answer:
        """An answer made here (not read from a wire)."""
        return cls(msgspec.json.encode(value))


class RawStream(Protocol):
    """An open streaming answer: its events in order, in batches — each batch what one read of the
    upstream's connection brought, so that what arrived together can be relayed together.

    Iteration raises :class:`app.errors.GatewayError` if the upstream fails mid-stream (after
    yielding the events that came before the failure).
    """

    def __aiter__(self) -> AsyncIterator[list[StreamEvent]]: ...

    def close(self) -> None:
        """Let go of the upstream's answer (its connection closed unless it was read to its end);
        at once, so that nothing can interrupt it (a relay being cancelled closes its stream)."""
        ...


class Upstream(Protocol):
    #: ``chat`` (OpenAI Chat Completions), ``responses`` (the OpenAI Responses API) or ``messages``
    #: (Anthropic Messages).
    wire: str

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        """A non-streaming answer (raises ``GatewayError`` on failure)."""
        ...

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> RawStream:
        """Start a streaming answer; raises before the first item if the upstream refuses."""
        ...

    async def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        """A JSON answer from another of the provider's endpoints (``/embeddings``), read whole."""
        ...

    async def post_upload(self, path: str, upload: Upload, headers: dict[str, str] | None = None) -> RawAnswer:
        """A multipart upload to another of the provider's endpoints (``/audio/transcriptions``),
        its whole answer as bytes."""
        ...

    async def open_bytes(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> ByteStream:
        """A JSON POST whose answer is relayed as bytes as they come (``/audio/speech``)."""
        ...

    async def open_upload(self, path: str, upload: Upload, headers: dict[str, str] | None = None) -> ByteStream:
        """A multipart upload whose answer is relayed as bytes as they come (a streamed transcription)."""
        ...

    async def aclose(self) -> None: ...
