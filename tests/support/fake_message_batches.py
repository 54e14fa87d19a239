"""The fake upstream's Anthropic Message Batches API, on the wire as Anthropic speaks it.

``POST /v1/messages/batches`` (``{"requests": [{"custom_id", "params"}]}``), ``GET
/v1/messages/batches/{id}``, ``GET /v1/messages/batches``, ``POST /v1/messages/batches/{id}/cancel``
and ``GET /v1/messages/batches/{id}/results`` (JSONL). A batch ends as the fake's OpenAI batches do
(``tests/support/fake_batches.py``: after the delay, or when the test releases them); each request's
result is the message the fake answers it with alone (the same usage). A cancelled batch answered
its first ``done_before_cancel`` requests, the rest ``canceled``; with ``expires_with`` set, a batch
that ends answered that many, the rest ``expired``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from tests.support.fake_anthropic import _block_output, _reply, anthropic_error, prompt_tokens, validate
from tests.support.fake_upstream import _Reject, tokens


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class MessageBatch:
    id: str
    requests: list[dict[str, Any]]
    created_at: str = field(default_factory=_now)
    created: float = field(default_factory=lambda: datetime.now(UTC).timestamp())
    status: str = "in_progress"
    ended_at: str | None = None
    cancel_initiated_at: str | None = None
    results: list[dict[str, Any]] = field(default_factory=list)

    def as_object(self, root: str) -> dict[str, Any]:
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if self.status == "ended":
            for result in self.results:
                counts[result["result"]["type"]] += 1
        else:
            counts["processing"] = len(self.requests)
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.status,
            "request_counts": counts,
            "ended_at": self.ended_at,
            "created_at": self.created_at,
            "expires_at": self.created_at,
            "archived_at": None,
            "cancel_initiated_at": self.cancel_initiated_at,
            "results_url": f"{root}/v1/messages/batches/{self.id}/results" if self.status == "ended" else None,
        }

    def end(self, done: int | None, rest: str = "canceled") -> None:
        """End the batch, its first ``done`` requests (None: all) answered and the rest ``rest``
        (``canceled``, ``expired``), as Anthropic writes a request it never ran."""
        for i, request in enumerate(self.requests):
            if done is not None and i >= done:
                self.results.append({"custom_id": request["custom_id"], "result": {"type": rest}})
            else:
                self.results.append({"custom_id": request["custom_id"], "result": _result(request["params"])})
        self.status, self.ended_at = "ended", _now()


def _result(params: dict[str, Any]) -> dict[str, Any]:
    d, blocks, stop_reason, stop_sequence = _reply(params)
    if d.fail is not None:
        return {"type": "errored", "error": anthropic_error("api_error", f"fake upstream failure {d.fail}")}
    message = {
        "id": "msg_" + secrets.token_hex(12),
        "type": "message",
        "role": "assistant",
        "model": params["model"],
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": {
            "input_tokens": prompt_tokens(params),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": sum(len(tokens(_block_output(b))) for b in blocks),
        },
    }
    return {"type": "succeeded", "message": message}


def route(state: Any, method: str, parts: list[str], raw: bytes, root: str) -> dict[str, Any] | bytes:
    """``parts``: the path after ``/v1/messages/batches``. ``state``: the fake's ``BatchState``."""
    batches: dict[str, MessageBatch] = state.message_batches
    if not parts and method == "POST":
        body = msgspec.json.decode(raw)
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            raise _Reject(400, anthropic_error("invalid_request_error", "requests: expected a non-empty array"))
        for item in requests:
            validate(item.get("params"))
        made = MessageBatch(f"msgbatch_{secrets.token_hex(12)}", requests)
        batches[made.id] = made
        return made.as_object(root)
    if not parts and method == "GET":
        return {
            "data": [b.as_object(root) for b in batches.values()],
            "has_more": False,
            "first_id": None,
            "last_id": None,
        }
    batch = batches.get(parts[0])
    if batch is None:
        raise _Reject(404, anthropic_error("not_found_error", f"No message batch {parts[0]}"))
    if parts[1:] == ["cancel"] and method == "POST":
        batch.status, batch.cancel_initiated_at = "canceling", _now()
        return batch.as_object(root)
    if batch.status == "canceling":
        batch.end(state.done_before_cancel)
    elif batch.status == "in_progress" and state.batch_may_end(batch.created):
        batch.end(state.expires_with, "expired")
    if parts[1:] == ["results"]:
        if batch.status != "ended":
            raise _Reject(400, anthropic_error("invalid_request_error", "the batch has not ended"))
        return b"".join(msgspec.json.encode(r) + b"\n" for r in batch.results)
    return batch.as_object(root)
