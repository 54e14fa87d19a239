"""A chat request passed through to a chat upstream: its answer relayed as the upstream wrote it.

Only what Tollgate adds changes: ``model`` is the id the client asked for (not the deployment's
name), and ``usage`` gains ``cost`` and ``remaining`` — in a stream, on the final usage chunk, held
back until the charge is durable (the upstream is always asked for usage; the client gets the chunk
only if it asked with ``stream_options.include_usage``).
"""

from __future__ import annotations

from typing import Any

from app.errors import GatewayError
from app.json import encode, object_or
from app.translate import canonical as c
from app.translate.chat.client import usage_dict
from domain.pricing import TokenUsage


def frame(chunk: Any) -> bytes:
    return b"data: " + encode(chunk) + b"\n\n"


def render_answer(answer: dict[str, Any], model_id: str, usage: TokenUsage, reasoning_tokens: int,
                  extra_usage: dict[str, Any]) -> dict[str, Any]:
    reported = object_or(answer.get("usage"), usage_dict(usage, reasoning_tokens))
    return {**answer, "model": model_id, "usage": {**reported, **extra_usage}}


class ChatPassThrough:
    def __init__(self, model_id: str, include_usage: bool) -> None:
        self._model_id = model_id
        self._include_usage = include_usage
        self._reported: dict[str, Any] | None = None
        self._last: dict[str, Any] = {}

    def start(self) -> list[bytes]:
        return []

    def write(self, chunk: dict[str, Any], events: list[c.Event]) -> list[bytes]:
        usage = chunk.pop("usage", None)
        if isinstance(usage, dict):
            self._reported = usage
        if not chunk.get("choices"):
            return []  # a usage-only chunk: sent again below, with the cost, once charged
        chunk["model"] = self._model_id
        if self._include_usage:
            chunk["usage"] = None
        self._last = chunk
        return [frame(chunk)]

    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]:
        if not self._include_usage:
            return [b"data: [DONE]\n\n"]
        last = self._last
        chunk: dict[str, Any] = {
            "id": last.get("id"),
            "object": "chat.completion.chunk",
            "created": last.get("created"),
            "model": self._model_id,
            "choices": [],
            "usage": {**(self._reported or usage_dict(usage, reasoning_tokens)), **extra_usage},
        }
        if "system_fingerprint" in last:
            chunk["system_fingerprint"] = last["system_fingerprint"]
        return [frame(chunk), b"data: [DONE]\n\n"]

    def error(self, exc: GatewayError) -> list[bytes]:
        raw = exc.upstream_event if exc.upstream_wire == "chat" else None
        return [frame(raw if raw is not None else exc.openai_body())]
