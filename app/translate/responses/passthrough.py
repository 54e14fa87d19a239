"""A Responses request passed through to a Responses upstream: its answer relayed as written.

Only what Tollgate adds changes: the response's ``model`` is the id the client asked for, and its
``usage`` gains ``cost`` and ``remaining`` — in a stream, on the final ``response.completed`` (or
``response.incomplete``), held back until the charge is durable.
"""

from __future__ import annotations

import re
from typing import Any

from app.errors import GatewayError
from app.json import object_or
from app.translate import canonical as c
from app.translate.answers import read_passed, render_passed
from app.translate.responses.client import usage_dict
from app.translate.responses.stream import sse
from app.translate.responses.upstream import (
    TOOL_CALL_ITEMS,
    reasoning_tokens,
    response_to_canonical,
    usage_from_responses,
)
from app.upstream.base import Answer
from domain.usage import TokenUsage

FINAL = ("response.completed", "response.incomplete")
_TOOL_CALL_ITEM = re.compile(b'"(?:' + b"|".join(item.encode() for item in TOOL_CALL_ITEMS) + b')"')


def read_answer(answer: Answer) -> c.Response:
    return read_passed(answer, _usage_of, reasoning_tokens, response_to_canonical)


def _usage_of(usage: Any, answer: Answer) -> TokenUsage | None:
    """The answer's usage, with its tier and its tools' calls: its output is decoded only if an item
    of a billed tool's call may be in it (a plain answer's output is passed on as it came)."""
    output = answer.members.get("output")
    tools = output is not None and _TOOL_CALL_ITEM.search(memoryview(output)) is not None
    return usage_from_responses(
        usage, {"service_tier": answer.member("service_tier"), "output": answer.member("output") if tools else None}
    )


def render_answer(
    answer: Answer, model_id: str, usage: TokenUsage, reasoning: int, extra_usage: dict[str, Any]
) -> bytes:
    return render_passed(answer, model_id, usage_dict(usage, reasoning), extra_usage)


class ResponsesPassThrough:
    def __init__(self, model_id: str) -> None:
        self._model_id = model_id
        self._final: dict[str, Any] | None = None
        self._snapshot: dict[str, Any] = {"object": "response", "model": model_id, "output": []}
        self._items: list[Any] = []
        self._seq = -1

    def start(self) -> list[bytes]:
        return []

    def write(self, event: dict[str, Any], events: list[c.Event]) -> list[bytes]:
        if isinstance(event.get("sequence_number"), int):
            self._seq = event["sequence_number"]
        response = event.get("response")
        if isinstance(response, dict):
            response["model"] = self._model_id
            self._snapshot = response
        kind = event.get("type")
        if kind in FINAL:
            self._final = event
            return []
        if kind == "response.output_item.done":
            self._items.append(event.get("item"))
        return [sse(event)]

    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]:
        final = self._final or {
            "type": "response.completed",
            "sequence_number": self._seq + 1,
            "response": {**self._snapshot, "status": "completed", "output": self._items},
        }
        response = final["response"]
        reported = object_or(response.get("usage"), usage_dict(usage, reasoning_tokens))
        return [sse({**final, "response": {**response, "usage": {**reported, **extra_usage}}})]

    def error(self, exc: GatewayError) -> list[bytes]:
        if exc.upstream_wire == "responses" and exc.upstream_event is not None:
            return [sse(exc.upstream_event)]
        failed = {
            **self._snapshot,
            "status": "failed",
            "output": self._items,
            "error": {"code": exc.type, "message": exc.message},
        }
        return [sse({"type": "response.failed", "sequence_number": self._seq + 1, "response": failed})]
