"""Sending one attempt of a planned request and recording exactly what came back.

The verdict compares what clients were told with what the ledger recorded, so the record keeps
everything a client could rely on: the status, the request id the answer carried (``x-request-id``;
the charge records the same one), the cost and remaining balance it reported (read as exact
decimals, never floats), whether a stream reached its protocol's terminal event or ended with an
in-stream error or broke off, the text it delivered, and any sign of a crash (a 200 that is not
JSON, a traceback in a body). The requests are raw HTTP (httpx), not an SDK, so that nothing is
parsed away before it is recorded.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

import httpx

from scripts.chaos.traffic import Plan

#: How an attempt ended.
ANSWERED = "answered"  # a whole HTTP answer that is not a stream (any status)
COMPLETE = "complete"  # a stream that reached its terminal event ([DONE], response.completed, message_stop)
ERROR_EVENT = "error-event"  # a stream that ended with the protocol's in-stream error
BROKEN = "broken"  # a stream that broke off without either (its gateway died)
NO_ANSWER = "no-answer"  # no HTTP status at all (refused, reset, timed out)


@dataclass
class Attempt:
    """One HTTP request the suite sent, and what came back."""

    plan: int
    number: int  # 1 for the first attempt, then retries and the replay
    gateway: int
    pid: int  # the gateway process it was sent to (0: none was running)
    started: float  # Unix time
    ended: float = 0.0
    replay: bool = False  # a deliberate second send of a request already answered
    status: int | None = None
    request_id: str = ""
    replayed: bool = False  # the answer said ``idempotent-replayed: true``
    outcome: str = NO_ANSWER
    cost: str | None = None  # usage.cost.credits, as the exact decimal text
    remaining: str | None = None  # usage.remaining.credits
    input_tokens: int | None = None
    output_tokens: int | None = None
    text: str = ""  # what a stream delivered
    error: str = ""  # the error message: the body's, the in-stream event's, or the exception's
    body: str = ""  # the answer's body (streams: their last frames), cut to a few kilobytes
    problems: list[str] = field(default_factory=list)  # what no client may ever see

    def as_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @property
    def cost_micros(self) -> int | None:
        return None if self.cost is None else int(Decimal(self.cost) * 1_000_000)

    @property
    def remaining_micros(self) -> int | None:
        return None if self.remaining is None else int(Decimal(self.remaining) * 1_000_000)


def _decode(text: str) -> Any:
    return json.loads(text, parse_float=Decimal)


def _usage_of(attempt: Attempt, usage: Any) -> None:
    """Read cost, remaining balance and tokens from any protocol's ``usage``."""
    if not isinstance(usage, dict):
        return
    cost = usage.get("cost")
    if isinstance(cost, dict) and "credits" in cost:
        attempt.cost = str(cost["credits"])
    remaining = usage.get("remaining")
    if isinstance(remaining, dict) and "credits" in remaining:
        attempt.remaining = str(remaining["credits"])
    for name in ("prompt_tokens", "input_tokens"):
        if isinstance(usage.get(name), int):
            attempt.input_tokens = usage[name]
    for name in ("completion_tokens", "output_tokens"):
        if isinstance(usage.get(name), int):
            attempt.output_tokens = usage[name]


def _error_message(obj: Any) -> str:
    error = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(error, dict):
        return str(error.get("message", ""))
    return ""


class StreamReader:
    """Follows one stream's SSE frames in any of the three protocols."""

    def __init__(self, endpoint: str, attempt: Attempt) -> None:
        self.endpoint = endpoint
        self.attempt = attempt
        self.terminal = False
        self.errored = False
        self._buffer = b""
        self.tail: list[str] = []

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while b"\n\n" in self._buffer:
            frame, self._buffer = self._buffer.split(b"\n\n", 1)
            self._frame(frame.decode("utf-8", "replace"))

    def _frame(self, frame: str) -> None:
        self.tail = ([*self.tail, frame])[-4:]
        if "Traceback" in frame:
            self.attempt.problems.append("a stream frame holds a traceback")
        event, data = "", []
        for line in frame.splitlines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        payload = "\n".join(data)
        if not payload:
            return
        if payload == "[DONE]":
            self.terminal = self.endpoint == "chat"
            return
        try:
            obj = _decode(payload)
        except ValueError:
            self.attempt.problems.append(f"a stream frame is not JSON: {payload[:200]!r}")
            return
        kind = obj.get("type", event) if isinstance(obj, dict) else event
        getattr(self, f"_{self.endpoint}")(kind, obj)

    def _failed(self, message: str) -> None:
        self.errored = True
        self.attempt.error = message

    def _chat(self, kind: str, obj: Any) -> None:
        if "error" in obj:
            return self._failed(_error_message(obj))
        for choice in obj.get("choices") or ():
            content = (choice.get("delta") or {}).get("content")
            if isinstance(content, str):
                self.attempt.text += content
        if obj.get("usage"):
            _usage_of(self.attempt, obj["usage"])

    def _responses(self, kind: str, obj: Any) -> None:
        if kind == "response.output_text.delta":
            self.attempt.text += str(obj.get("delta", ""))
        elif kind == "response.completed":
            _usage_of(self.attempt, (obj.get("response") or {}).get("usage"))
            self.terminal = True
        elif kind == "response.failed":
            self._failed(str(((obj.get("response") or {}).get("error") or {}).get("message", "")))
        elif kind == "error":
            self._failed(str(obj.get("message", "") or _error_message(obj)))

    def _messages(self, kind: str, obj: Any) -> None:
        if kind == "content_block_delta":
            delta = obj.get("delta") or {}
            if delta.get("type") == "text_delta":
                self.attempt.text += str(delta.get("text", ""))
        elif kind == "message_delta":
            _usage_of(self.attempt, obj.get("usage"))
        elif kind == "message_stop":
            self.terminal = True
        elif kind == "error":
            self._failed(_error_message(obj))


def headers_for(plan: Plan, key: str) -> dict[str, str]:
    headers = {"content-type": "application/json"}
    if plan.endpoint == "messages":
        headers.update({"x-api-key": key, "anthropic-version": "2023-06-01"})
    else:
        headers["authorization"] = f"Bearer {key}"
    if plan.idempotency_key:
        headers["idempotency-key"] = plan.idempotency_key
    return headers


def _read_answer(attempt: Attempt, response: httpx.Response, content: bytes) -> None:
    text = content.decode("utf-8", "replace")
    attempt.body = text[:4000]
    attempt.outcome = ANSWERED
    if "Traceback" in text:
        attempt.problems.append("the answer holds a traceback")
    try:
        obj = _decode(text)
    except ValueError:
        if response.status_code == 200:
            attempt.problems.append(f"a 200 whose body is not JSON: {text[:200]!r}")
        else:
            attempt.error = text[:300]
        return
    if response.status_code == 200:
        _usage_of(attempt, obj.get("usage") if isinstance(obj, dict) else None)
        if attempt.cost is None:
            attempt.problems.append("a 200 without usage.cost.credits")
    else:
        attempt.error = _error_message(obj) or text[:300]


async def send(
    client: httpx.AsyncClient, base_url: str, plan: Plan, key: str, attempt: Attempt, streaming: dict[int, int]
) -> Attempt:
    """Send the plan's request once and fill in ``attempt``. ``streaming`` counts, per gateway, the
    streams that have delivered content and are still open (the kill waits for some)."""
    counted = False
    try:
        async with client.stream(
            "POST", base_url + plan.path, json=plan.body(), headers=headers_for(plan, key)
        ) as response:
            attempt.status = response.status_code
            attempt.request_id = response.headers.get("x-request-id", "")
            attempt.replayed = response.headers.get("idempotent-replayed") == "true"
            is_stream = response.headers.get("content-type", "").startswith("text/event-stream")
            if not is_stream:
                _read_answer(attempt, response, await response.aread())
                return attempt
            reader = StreamReader(plan.endpoint, attempt)
            try:
                async for data in response.aiter_raw():
                    reader.feed(data)
                    if attempt.text and not counted:
                        streaming[plan.gateway] = streaming.get(plan.gateway, 0) + 1
                        counted = True
            except httpx.HTTPError as exc:
                attempt.outcome = BROKEN
                attempt.error = f"{type(exc).__name__}: {exc}"
                attempt.body = "\n\n".join(reader.tail)[-4000:]
                return attempt
            attempt.body = "\n\n".join(reader.tail)[-4000:]
            attempt.outcome = ERROR_EVENT if reader.errored else COMPLETE if reader.terminal else BROKEN
            if attempt.outcome == COMPLETE and attempt.cost is None:
                attempt.problems.append("a complete stream that never reported usage.cost.credits")
            if attempt.outcome == BROKEN and not attempt.error:
                attempt.error = "the stream ended without its terminal event"
    except httpx.HTTPError as exc:
        attempt.outcome = NO_ANSWER if attempt.status is None else BROKEN
        attempt.error = attempt.error or f"{type(exc).__name__}: {exc}"
    finally:
        attempt.ended = time.time()
        if counted:
            streaming[plan.gateway] -= 1
    return attempt
