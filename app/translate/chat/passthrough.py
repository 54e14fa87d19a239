"""A chat request passed through to a chat upstream: its answer relayed as the upstream wrote it.

Only what Tollgate adds changes: ``model`` is the id the client asked for (not the deployment's
name), and ``usage`` gains ``cost`` and ``remaining`` — in a stream, on the final usage chunk, held
back until the charge is durable (the upstream is always asked for usage; the client gets the chunk
only if it asked with ``stream_options.include_usage``, and then ``"usage": null`` on every other
chunk, as OpenAI sends it; without, chunks carry no ``usage``).

A streamed chunk goes out as the upstream's bytes, with the model's name spliced in
(``app/translate/raw_json.py``); it is decoded once, for what the bill needs (text, reasoning, tool
calls, usage) and no more. A chunk whose bytes cannot be changed that way (a usage report on a chunk
with choices, say) is rewritten whole, as every chunk used to be.
"""

from __future__ import annotations

from typing import Any

import msgspec

from app.errors import GatewayError
from app.json import encode
from app.translate import canonical as c
from app.translate.answers import read_passed, render_passed
from app.translate.chat.chunk_shape import Delta, read_chunk
from app.translate.chat.client import usage_dict
from app.translate.chat.upstream import (
    ChatChunkReader,
    chat_response_to_canonical,
    reasoning_tokens,
    text_events,
    usage_from_openai,
)
from app.translate.raw_json import UNSET, Splicer
from app.translate.stream_relay import Relayed, data_frame, relay_each
from app.upstream.base import Answer, StreamEvent
from domain.usage import TokenUsage

_DONE = b"data: [DONE]\n\n"
_NEXT_FRAME = b"\n\ndata: "


def frame(chunk: Any) -> bytes:
    return b"data: " + encode(chunk) + b"\n\n"


def read_answer(answer: Answer) -> c.Response:
    return read_passed(
        answer,
        lambda usage, whole: usage_from_openai(usage, whole.member("service_tier")),
        lambda usage: reasoning_tokens(usage, "completion_tokens_details"),
        chat_response_to_canonical,
    )


def render_answer(
    answer: Answer, model_id: str, usage: TokenUsage, reasoning: int, extra_usage: dict[str, Any]
) -> bytes:
    return render_passed(answer, model_id, usage_dict(usage, reasoning), extra_usage)


def _read_deltas(deltas: list[Delta], events: list[c.Event]) -> None:
    """The deltas' reasoning and text (read as ``text_events`` reads one delta), as one event of
    each kind: what was delivered is counted per kind, whole, so the pieces' boundaries do not count."""
    thoughts = [r for d in deltas for r in (d.reasoning_content or d.reasoning,) if r and type(r) is str]
    if thoughts:
        events.append(c.ThinkingDelta("".join(thoughts)))
    texts = [d.content if type(d.content) is str else str(d.content) for d in deltas if d.content]
    if texts:
        events.append(c.TextDelta("".join(texts)))


class ChatPassThrough:
    """A chat stream relayed to a chat client (a :class:`~app.translate.stream_relay.StreamRelay`).

    A chunk is decoded once, into :class:`~app.translate.chat.chunk_shape.Chunk`; one that does not
    fit it (a tool call's delta, whose ids the reader keeps track of; anything of an unexpected
    shape) is read whole, as a dict, by the chat reader."""

    __slots__ = ("_include_usage", "_last", "_model_id", "_reader", "_reported", "_splicer")

    def __init__(self, model_id: str, include_usage: bool) -> None:
        self._model_id = model_id
        self._include_usage = include_usage
        self._reader = ChatChunkReader()
        self._splicer = Splicer(model_id)
        self._reported: dict[str, Any] | None = None
        #: The last chunk sent: its id, created and system_fingerprint (UNSET if it had none).
        self._last: tuple[Any, Any, Any] = (None, None, UNSET)

    def start(self) -> list[bytes]:
        return []

    def relay(self, batch: list[StreamEvent]) -> Relayed:
        if len(batch) > 1:
            relayed = self._relay_together(batch)
            if relayed is not None:
                return relayed
        return relay_each(batch, self._relay_one)

    def _relay_together(self, batch: list[StreamEvent]) -> Relayed | None:
        """The common case, a read's chunks at once: the model's name spliced into all of them with
        one replace and checked with one decode (where each chunk alone would cost a few calls of
        each). Only for chunks of the shape the relay reads (no tool calls), with one model name,
        one line each, whose ``usage`` is null or absent where they have choices, and where the
        name's text occurs once per chunk; None otherwise (and nothing is changed)."""
        datas = [event.data for event in batch]
        try:
            chunks = [read_chunk(data) for data in datas]
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            return None
        deltas = [
            choice.delta for chunk in chunks if chunk.choices for choice in chunk.choices if choice.delta is not None
        ]
        if any(delta.tool_calls for delta in deltas):
            return None  # the reader follows tool calls: chunk by chunk
        events: list[c.Event] = []
        sent: list[bytes] = []
        models = set()
        nulls = 0
        include_usage = self._include_usage
        reported, last = self._reported, None
        for data, chunk in zip(datas, chunks, strict=True):
            usage = chunk.usage
            if chunk.choices:
                if usage is not None and (usage is not UNSET or include_usage):
                    return None  # a usage to take out of the chunk, or a null one to add: chunk by chunk
                nulls += usage is None
                models.add(chunk.model)
                sent.append(data)
                last = chunk
            elif usage is not None and usage is not UNSET:  # a usage-only chunk: sent again, with the cost
                if not isinstance(usage, dict):
                    return None
                reported = usage
                counted = usage_from_openai(usage, chunk.service_tier)
                if counted is not None:
                    events.append(c.UsageReported(counted, reasoning_tokens(usage, "completion_tokens_details")))
        frames = self._spliced_together(sent, models, nulls) if sent else []
        if frames is None:
            return None
        _read_deltas(deltas, events)
        self._reported = reported
        if last is not None:
            self._last = (last.id, last.created, last.system_fingerprint)
        return Relayed(frames, events)

    def _spliced_together(self, sent: list[bytes], models: set[Any], nulls: int) -> list[bytes] | None:
        if len(models) != 1:
            return None
        (model,) = models
        # Joined by a byte no chunk holds (the SSE parser ends lines at a raw \r, and JSON strings
        # hold none): counted below, as the frames are cut apart again.
        spliced = self._splicer.splice_all(
            b"\r".join(sent), len(sent), model, nulls, None if self._include_usage else UNSET
        )
        if spliced is None:
            return None
        lines = spliced.replace(b"\n", b"\ndata: ") if b"\n" in spliced else spliced  # multi-line data stays so
        frames = lines.replace(b"\r", _NEXT_FRAME)
        if len(frames) - len(lines) != (len(sent) - 1) * (len(_NEXT_FRAME) - 1):
            return None
        return [b"data: " + frames + b"\n\n"]

    def _relay_one(self, event: StreamEvent) -> tuple[list[bytes], list[c.Event]]:
        try:
            chunk = read_chunk(event.data)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            return self._relay_whole(event)
        choices = chunk.choices
        events: list[c.Event] = []
        for choice in choices or ():
            delta = choice.delta
            if delta is not None:
                if delta.tool_calls:
                    return self._relay_whole(event)
                text_events(events, delta.reasoning_content or delta.reasoning, delta.content)
        usage = chunk.usage
        if isinstance(usage, dict):
            self._reported = usage
            reported = usage_from_openai(usage, chunk.service_tier)
            if reported is not None:
                events.append(c.UsageReported(reported, reasoning_tokens(usage, "completion_tokens_details")))
        if not choices:
            return [], events  # a usage-only chunk: sent again, with the cost, once charged
        self._last = (chunk.id, chunk.created, chunk.system_fingerprint)
        data = self._spliced(event.data, chunk.model, usage)
        if data is None:
            return [frame(self._rewritten(event.json()))], events
        return [data_frame(data)], events

    def _relay_whole(self, event: StreamEvent) -> tuple[list[bytes], list[c.Event]]:
        """A chunk read whole, by the chat reader, and sent spliced (or rewritten, if it must be)."""
        chunk = event.object()
        if chunk is None:
            return [], []
        events = self._reader.events(chunk)
        usage = chunk.get("usage", UNSET)
        if isinstance(usage, dict):
            self._reported = usage
        if not chunk.get("choices"):
            return [], events
        self._last = (chunk.get("id"), chunk.get("created"), chunk.get("system_fingerprint", UNSET))
        data = self._spliced(event.data, chunk.get("model", UNSET), usage) if event.utf8 else None
        if data is None:
            return [frame(self._rewritten(chunk))], events
        return [data_frame(data)], events

    def _spliced(self, data: bytes, model: Any, usage: Any) -> bytes | None:
        """The chunk's bytes with the client's model, and ``"usage": null`` if the client asked for
        usage (none if not), when that can be done exactly by splicing; else None."""
        if usage is not None and usage is not UNSET:
            return None  # usage reported on a chunk with choices: taken out of it, whole
        return self._splicer.splice(data, model, usage, None if self._include_usage else UNSET)

    def _rewritten(self, chunk: dict[str, Any]) -> dict[str, Any]:
        """The chunk rewritten whole: ``model`` set, ``usage`` taken out (null at the end, if the
        client asked for usage)."""
        chunk = dict(chunk)
        chunk.pop("usage", None)
        chunk["model"] = self._model_id
        if self._include_usage:
            chunk["usage"] = None
        return chunk

    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]:
        if not self._include_usage:
            return [_DONE]
        chunk_id, created, fingerprint = self._last
        chunk: dict[str, Any] = {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": self._model_id,
            "choices": [],
            "usage": {**(self._reported or usage_dict(usage, reasoning_tokens)), **extra_usage},
        }
        if fingerprint is not UNSET:
            chunk["system_fingerprint"] = fingerprint
        return [frame(chunk), _DONE]

    def error(self, exc: GatewayError) -> list[bytes]:
        raw = exc.upstream_event if exc.upstream_wire == "chat" else None
        return [frame(raw if raw is not None else exc.openai_body())]
