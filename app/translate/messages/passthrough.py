"""A Messages request passed through to an Anthropic upstream: its answer relayed as written.

Only what Tollgate adds changes: ``model`` is the id the client asked for, and ``usage`` gains
``cost`` and ``remaining`` — in a stream, on the final ``message_delta``, held back (with
``message_stop``) until the charge is durable.
"""

from __future__ import annotations

from typing import Any

from app.errors import GatewayError
from app.json import object_or
from app.translate import canonical as c
from app.translate.messages.client import sse, usage_dict
from domain.pricing import TokenUsage


def render_answer(answer: dict[str, Any], model_id: str, usage: TokenUsage, reasoning_tokens: int,
                  extra_usage: dict[str, Any]) -> dict[str, Any]:
    reported = object_or(answer.get("usage"), usage_dict(usage))
    return {**answer, "model": model_id, "usage": {**reported, **extra_usage}}


class MessagesPassThrough:
    def __init__(self, model_id: str) -> None:
        self._model_id = model_id
        self._delta: dict[str, Any] | None = None

    def start(self) -> list[bytes]:
        return []

    def write(self, event: dict[str, Any], events: list[c.Event]) -> list[bytes]:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            event["message"]["model"] = self._model_id
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
