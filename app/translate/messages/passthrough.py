"""A Messages request passed through to an Anthropic upstream: its answer relayed as written.

Only what Tollgate adds changes: ``model`` is the id the client asked for, and ``usage`` gains
``cost`` and ``remaining`` — in a stream, on the final ``message_delta``, held back (with
``message_stop``) until the charge is durable.

In a stream, every event but those three (``message_start``, which names the model, once; the
final two, which carry the cost) goes out as the upstream's bytes, decoded once for what the bill
needs (text, tool calls, thinking).
"""

from __future__ import annotations

from typing import Any

from app.errors import GatewayError
from app.json import object_or
from app.translate import canonical as c
from app.translate.answers import read_passed, render_passed
from app.translate.messages.client import sse, usage_dict
from app.translate.messages.upstream import (
    MessagesEventReader,
    message_to_canonical,
    thinking_tokens,
    usage_from_anthropic,
)
from app.translate.stream_relay import Relayed, data_frame, relay_each
from app.upstream.base import Answer, StreamEvent
from domain.usage import TokenUsage

#: The events rewritten (or held back) rather than relayed as they came.
_REWRITTEN = frozenset({"message_start", "message_delta", "message_stop"})


def read_answer(answer: Answer) -> c.Response:
    return read_passed(answer, lambda usage, _: usage_from_anthropic(usage), thinking_tokens, message_to_canonical)


def render_answer(
    answer: Answer, model_id: str, usage: TokenUsage, reasoning: int, extra_usage: dict[str, Any]
) -> bytes:
    return render_passed(answer, model_id, usage_dict(usage), extra_usage)


class MessagesPassThrough:
    """A Messages stream relayed to a Messages client (a :class:`~app.translate.stream_relay.StreamRelay`)."""

    __slots__ = ("_delta", "_model_id", "_reader")

    def __init__(self, model_id: str) -> None:
        self._model_id = model_id
        self._reader = MessagesEventReader()
        self._delta: dict[str, Any] | None = None

    def start(self) -> list[bytes]:
        return []

    def relay(self, batch: list[StreamEvent]) -> Relayed:
        return relay_each(batch, self._relay_one)

    def _relay_one(self, event: StreamEvent) -> tuple[list[bytes], list[c.Event]]:
        raw = event.object()
        if raw is None:
            return [], []
        events = self._reader.events(raw)
        kind = raw.get("type")
        if isinstance(kind, str) and kind not in _REWRITTEN and event.utf8:
            return [data_frame(event.data, kind.encode())], events
        return self._rewritten(raw), events

    def _rewritten(self, event: dict[str, Any]) -> list[bytes]:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            event = {**event, "message": {**event["message"], "model": self._model_id}}
        elif kind == "message_delta":
            self._delta = event
            return []
        elif kind == "message_stop":
            return []
        return [sse(event)]

    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]:
        delta = self._delta or {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}}
        reported = object_or(delta.get("usage"), usage_dict(usage))
        return [sse({**delta, "usage": {**reported, **extra_usage}}), sse({"type": "message_stop"})]

    def error(self, exc: GatewayError) -> list[bytes]:
        raw = exc.upstream_event if exc.upstream_wire == "messages" else None
        return [sse(raw if raw is not None else exc.anthropic_body())]
