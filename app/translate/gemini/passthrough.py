"""A Gemini request passed through to a Gemini upstream: its answer relayed as Google wrote it.

Only what Tollgate adds changes: ``modelVersion`` stays Google's, and ``usageMetadata`` gains
``cost`` and ``remaining``. In a stream every chunk goes out as Google's bytes as it comes until
the one that carries the finish reason; that one (and any after it) is held back until the charge
is durable, then sent with the cost in its ``usageMetadata``. The upstream is always asked for
Server-Sent Events; a client that asked for the JSON array gets the same chunks in that framing.
"""

from __future__ import annotations

from typing import Any

from app.errors import GatewayError
from app.json import encode, object_or
from app.translate import canonical as c
from app.translate.gemini.answer import usage_metadata
from app.translate.gemini.upstream import (
    GeminiChunkReader,
    gemini_response_to_canonical,
    thoughts_tokens,
    usage_from_gemini,
)
from app.translate.stream_relay import Relayed, relay_each
from app.upstream.base import Answer, StreamEvent
from domain.usage import TokenUsage


def read_answer(answer: Answer) -> c.Response:
    meta = answer.member("usageMetadata")
    usage = usage_from_gemini(meta)
    if usage is None:
        return gemini_response_to_canonical(answer.json())
    return c.Response(id="", model="", parts=[], finish="stop", usage=usage, reasoning_tokens=thoughts_tokens(meta))


def render_answer(
    answer: Answer, model_id: str, usage: TokenUsage, reasoning: int, extra_usage: dict[str, Any]
) -> bytes:
    reported = object_or(answer.member("usageMetadata"), usage_metadata(usage, reasoning))
    return encode({**answer.members, "usageMetadata": {**reported, **extra_usage}})


class GeminiPassThrough:
    """A Gemini stream relayed to a Gemini client (a :class:`~app.translate.stream_relay.StreamRelay`)."""

    __slots__ = ("_held", "_reader", "_sent", "_sse")

    def __init__(self, sse: bool) -> None:
        self._sse = sse
        self._reader = GeminiChunkReader()
        self._held: list[dict[str, Any]] = []
        self._sent = False

    def _frame(self, data: bytes) -> bytes:
        if self._sse:
            return b"data: " + data + b"\r\n\r\n"
        head = b"," if self._sent else b""
        self._sent = True
        return head + data + b"\n"

    def start(self) -> list[bytes]:
        return [] if self._sse else [b"["]

    def relay(self, batch: list[StreamEvent]) -> Relayed:
        return relay_each(batch, self._relay_one)

    def _relay_one(self, event: StreamEvent) -> tuple[list[bytes], list[c.Event]]:
        raw = event.object()
        if raw is None:
            return [], []
        events = self._reader.events(raw)
        if self._held or any(isinstance(e, c.Finished) for e in events):
            self._held.append(raw)
            return [], events
        return [self._frame(event.data if event.utf8 else encode(raw))], events

    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]:
        held = self._held or [{"candidates": [{"index": 0, "finishReason": "STOP"}]}]
        *before, last = held
        reported = object_or(last.get("usageMetadata"), usage_metadata(usage, reasoning_tokens))
        last = {**last, "usageMetadata": {**reported, **extra_usage}}
        frames = [self._frame(encode(chunk)) for chunk in [*before, last]]
        return frames + ([] if self._sse else [b"]"])

    def error(self, exc: GatewayError) -> list[bytes]:
        raw = exc.upstream_event if exc.upstream_wire == "gemini" else None
        body = raw if isinstance(raw, dict) else exc.gemini_body()
        return [self._frame(encode(body))] + ([] if self._sse else [b"]"])
