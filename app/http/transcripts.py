"""Transcriptions and translations sent upstream, and charged what their answer reports.

**A whole answer.** The form goes upstream as a stream (``app/http/multipart.py``), the model's name
put in for each deployment. The charge is what the answer reports (``domain/audio_pricing.py``):
``usage: {"type": "tokens", ...}`` for a model priced per token (gpt-4o-transcribe), ``{"type":
"duration", "seconds": N}`` for one priced per second (whisper-1), else the file's own seconds. A
JSON answer gains ``usage.cost`` and ``usage.remaining`` as chat's does (its usage made here when the
upstream sent none); a ``text``, ``srt`` or ``vtt`` answer goes back as the upstream wrote it, its
cost in the headers only. A ``text`` answer of a model priced per token is asked of the upstream as
``json``, whose usage says the tokens to charge, and goes back as the text it carries, a line of its
own, as the upstream writes a ``text`` answer: the gateway never charges a bound for want of a count.

**A stream** (``stream=true``: gpt-4o-transcribe and gpt-4o-mini-transcribe answer server-sent
events). Every ``transcript.text.delta`` is relayed as it completes; the ``transcript.text.done``
event, which carries the whole text and the usage, is held back until the charge made from that
usage is durable, then sent with ``usage.cost`` and ``usage.remaining`` in it, as a chat stream's
last chunk carries its cost. A stream that ends without it (the upstream broke off, the client hung
up) is not charged: the client did not get the transcript it asked for. An upstream that answers a
stream request whole (whisper-1 ignores ``stream``) is answered whole, as without ``stream``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

import msgspec
from litestar import Request, Response

from app.errors import GatewayError, UpstreamFailure
from app.http.audio_call import AudioAsk, Outgoing, cost_headers, held
from app.http.billed_call import BilledCall
from app.http.event_stream import EventStream, LastChunk
from app.json import encode, object_or
from app.runtime import Runtime
from app.upstream import Answer
from app.upstream.media import ByteStream, RawAnswer
from app.upstream.sse import SSEParser
from domain import audio_pricing
from domain.pricing import Quote
from domain.usage import TokenUsage

#: How OpenAI sends a ``text`` transcription.
TEXT = "text/plain; charset=utf-8"
#: The type of the event that ends a streamed transcription, and carries its usage.
DONE = "transcript.text.done"
_DONE = b'"' + DONE.encode() + b'"'
_decode = msgspec.json.Decoder().decode


@dataclass(slots=True)
class Transcript:
    """A whole transcription answer: what it is charged for, and its body once the charge is known."""

    raw: RawAnswer
    answer: Answer | None
    usage: TokenUsage
    #: The ``text`` answer made of a JSON one (a model priced per token, asked for ``text``), or None.
    text: str | None = None
    #: The charge's ``cost`` and ``remaining``, once rendered.
    charged: dict[str, Any] = field(default_factory=dict)

    @property
    def content_type(self) -> str:
        return TEXT if self.text is not None else self.raw.content_type

    def render(self, fields: dict[str, Any]) -> bytes:
        """The answer's body, its JSON ``usage`` carrying ``fields`` (the charge's cost)."""
        self.charged.update(fields)
        if self.text is not None:
            return self.text.encode()
        if self.answer is None:
            return self.raw.content
        reported = object_or(self.answer.member("usage"), None) or made_usage(self.usage)
        return encode({**self.answer.members, "usage": {**reported, **fields}})


def transcript_of(raw: RawAnswer, quote: Quote, ask: AudioAsk, as_text: bool = False) -> Transcript:
    """A whole answer, read for what it is charged."""
    assert ask.heard is not None  # a transcription's
    answer = Answer(raw.content) if raw.is_json else None
    reported = object_or(answer.member("usage"), None) if answer is not None else None
    usage = audio_pricing.usage_of(quote.price, ask.heard, reported)
    return Transcript(raw, answer, usage, _text_of(answer) if as_text else None)


def made_usage(usage: TokenUsage) -> dict[str, Any]:
    """The usage of an answer that sent none, in the shape of what it is charged by."""
    if usage.audio_seconds:
        return {"type": "duration", "seconds": usage.audio_seconds}
    return {
        "type": "tokens",
        "input_tokens": usage.input_tokens + usage.audio_input_tokens,
        "input_token_details": {"audio_tokens": usage.audio_input_tokens, "text_tokens": usage.input_tokens},
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.audio_input_tokens + usage.output_tokens,
    }


def _text_of(answer: Answer | None) -> str:
    """A JSON transcription's ``text`` as a ``text`` answer writes it."""
    text = answer.member("text") if answer is not None else None
    if not isinstance(text, str):
        raise UpstreamFailure("The upstream provider sent a transcription without text.")
    return text + "\n"


async def serve_transcription(runtime: Runtime, request: Request[Any, Any, Any], ask: AudioAsk) -> Response[bytes]:
    """Hold the request's bound, upload the form, charge what the answer reports, answer with the cost."""
    call, quote = await held(runtime, request, ask)
    if not isinstance(call, BilledCall):
        return call  # the stored answer of the request served before under this Idempotency-Key
    outgoing = ask.outgoing
    as_text = audio_pricing.token_priced(quote.price) and ask.fields.get("response_format") == "text"
    if as_text:
        outgoing.overrides["response_format"] = "json"
    async with call:
        call.seal()
        raw = await call.call_upstream(lambda upstream: upstream.post_upload(outgoing.path, outgoing.upload_for))
        transcript = transcript_of(raw, quote, ask, as_text)
        body = await call.charge(transcript.usage, transcript.render, content_type=transcript.content_type)
    headers = {**call.headers, **cost_headers(transcript.charged)}
    return Response(body, headers=headers, media_type=transcript.content_type)


async def serve_transcription_stream(
    runtime: Runtime, request: Request[Any, Any, Any], ask: AudioAsk
) -> Response[bytes] | EventStream:
    """Hold the request's bound, open the upstream's answer, relay it, charge its final usage."""
    call, quote = await held(runtime, request, ask)
    if not isinstance(call, BilledCall):
        return call
    relay = _relay(call, ask, quote)
    first = await relay.__anext__()  # the upstream's refusal is an ordinary error answer
    return EventStream(first, relay, headers=call.headers)


async def _relay(call: BilledCall[Outgoing], ask: AudioAsk, quote: Quote) -> AsyncGenerator[bytes, None]:
    """Open the upstream's answer; relay its events (its last one once charged), or answer it whole."""
    outgoing = ask.outgoing
    async with call:
        opened = await call.call_upstream(lambda upstream: upstream.open_upload(outgoing.path, outgoing.upload_for))
        try:
            if opened.content_type.split(";")[0].strip().lower() != "text/event-stream":
                yield await _whole(call, ask, quote, opened)
                return
            call.seal()
            yield b""  # the head goes out with the first events; nothing is charged yet
            events = _Events(call)
            async for chunk in opened:
                frames = events.feed(chunk)
                if frames:
                    yield frames
            frames = events.end()
            if frames:
                yield frames
            if events.done is None:
                return  # ended before its transcript: not charged (the call, still held, is released)
            yield await _charged_end(call, ask, quote, events)
        finally:
            opened.close()


async def _whole(call: BilledCall[Outgoing], ask: AudioAsk, quote: Quote, opened: ByteStream) -> bytes:
    """An answer that is not a stream, read whole (a transcript: small) and charged as one."""
    content = b"".join([chunk async for chunk in opened])
    transcript = transcript_of(RawAnswer(opened.content_type, content), quote, ask)
    call.seal({"content-type": transcript.content_type})
    body = await call.charge(transcript.usage, transcript.render, content_type=transcript.content_type)
    call.headers.update(cost_headers(transcript.charged))  # plain numbers: always sendable
    return body


async def _charged_end(call: BilledCall[Outgoing], ask: AudioAsk, quote: Quote, events: _Events) -> LastChunk:
    """The held-back ``transcript.text.done`` (and whatever followed it), its usage carrying the cost
    of the charge made from it; an in-stream error when the charge cannot be made."""
    assert ask.heard is not None
    assert events.done is not None
    reported = events.done.get("usage")
    usage = audio_pricing.usage_of(quote.price, ask.heard, reported)
    shown = reported if isinstance(reported, dict) else made_usage(usage)

    def final(fields: dict[str, Any]) -> list[bytes]:
        done = {**events.done_event(), "usage": {**shown, **fields}}
        return [_frame(encode(done)), *events.after]

    try:
        frames = await call.charge_stream(usage, final)
    except GatewayError as exc:  # the hold stays open and visible; the client is told nothing was billed
        frames = _frame(encode(exc.openai_body()))
    return await call.last_frames(frames)


class _Events:
    """The upstream's events as frames to relay, the ``transcript.text.done`` one held back (and any
    after it: they go out with it, once it is charged)."""

    def __init__(self, call: BilledCall[Outgoing]) -> None:
        self._call = call
        self._parser = SSEParser()
        self.done: dict[str, Any] | None = None
        self.after: list[bytes] = []

    def done_event(self) -> dict[str, Any]:
        assert self.done is not None
        return self.done

    def feed(self, chunk: bytes) -> bytes:
        return self._frames(self._parser.feed(chunk))

    def end(self) -> bytes:
        return self._frames(self._parser.end())

    def _frames(self, found: list[bytes]) -> bytes:
        frames: list[bytes] = []
        for data in found:
            if self.done is not None:
                self.after.append(_frame(data))
            elif _DONE in data and (event := _done(data)) is not None:
                self.done = event
            else:
                frames.append(_frame(data))
        sent = b"".join(frames)
        if sent and self._call.transcript is not None:
            self._call.transcript.append(sent)
        return sent


def _done(data: bytes) -> dict[str, Any] | None:
    """The event ``data`` if it is the one that ends the transcript, else None."""
    try:
        event = _decode(data)
    except msgspec.DecodeError:
        return None
    return event if isinstance(event, dict) and event.get("type") == DONE else None


def _frame(data: bytes) -> bytes:
    """An event of ``data`` as OpenAI writes them: one data line (more for data of several lines)."""
    return b"data: " + (data.replace(b"\n", b"\ndata: ") if b"\n" in data else data) + b"\n\n"
