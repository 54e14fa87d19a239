"""Canonical answers → a Gemini client's wire: a ``GenerateContentResponse``, whole or as a stream.

A stream is Server-Sent Events of ``GenerateContentResponse`` chunks (``?alt=sse``, what Google's SDKs
ask for), or, without ``alt=sse``, the chunks as one JSON array sent as they come, as Google serves
it. A function call goes out whole in one chunk (Gemini never splits its arguments), with the
upstream's id. Tollgate's ``cost`` and ``remaining`` ride in ``usageMetadata`` beside Google's counts
(Google's SDK ignores fields it does not know; the answer's raw JSON has them).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from app.errors import GatewayError
from app.json import encode
from app.translate import canonical as c
from app.translate.gemini.thoughts import signature_of
from domain.usage import TokenUsage

_FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP", "content_filter": "SAFETY"}


def usage_metadata(usage: TokenUsage, reasoning_tokens: int) -> dict[str, Any]:
    """Google's counts: the answer's tokens (``candidatesTokenCount``) without its thoughts'."""
    out: dict[str, Any] = {
        "promptTokenCount": usage.prompt_tokens,
        "candidatesTokenCount": max(0, usage.output_tokens - reasoning_tokens),
        "totalTokenCount": usage.total_tokens,
    }
    if usage.cache_hit_tokens:
        out["cachedContentTokenCount"] = usage.cache_hit_tokens
    if reasoning_tokens:
        out["thoughtsTokenCount"] = reasoning_tokens
    return out


def _args(call: c.ToolCall) -> dict[str, Any]:
    """A call's arguments as Gemini's ``args`` object (a custom tool's text as ``{"input": …}``)."""
    if call.custom:
        return {"input": call.arguments}
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return {"arguments": call.arguments}
    return value if isinstance(value, dict) else {"value": value}


def _thought(thinking: c.Thinking, include: bool) -> dict[str, Any] | None:
    """A thought part: its text if the client asked for thoughts, its state as the signature."""
    part: dict[str, Any] = {"thought": True}
    if include and thinking.text:
        part["text"] = thinking.text
    if (signature := signature_of(thinking)) is not None:
        part["thoughtSignature"] = signature
    return part if len(part) > 1 else None


def _part(part: c.Text | c.ToolCall | c.Thinking, include_thoughts: bool) -> dict[str, Any] | None:
    if isinstance(part, c.Text):
        return {"text": part.text}
    if isinstance(part, c.Thinking):
        return _thought(part, include_thoughts)
    return {"functionCall": {"id": part.id, "name": part.name, "args": _args(part)}}


def _chunk(
    model_id: str, response_id: str, parts: list[dict[str, Any]] | None, finish: str | None = None
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"index": 0}
    if parts is not None:
        candidate["content"] = {"role": "model", "parts": parts}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": model_id, "responseId": response_id}


def canonical_to_gemini(
    resp: c.Response, model_id: str, include_thoughts: bool, extra_usage: dict[str, Any]
) -> dict[str, Any]:
    parts = [out for p in resp.parts if (out := _part(p, include_thoughts)) is not None]
    body = _chunk(model_id, secrets.token_urlsafe(16), parts, _FINISH.get(resp.finish, "STOP"))
    usage = usage_metadata(resp.usage, resp.reasoning_tokens) if resp.usage else {}
    body["usageMetadata"] = {**usage, **extra_usage}
    return body


class GeminiStreamWriter:
    """Canonical stream events → ``GenerateContentResponse`` chunks, as SSE or as a JSON array."""

    def __init__(self, model_id: str, include_thoughts: bool, *, sse: bool = True) -> None:
        self._model_id = model_id
        self._include = include_thoughts
        self._sse = sse
        self._id = secrets.token_urlsafe(16)
        self._call: c.ToolCall | None = None
        self._finish: c.Finished | None = None
        self._sent = False

    def _frame(self, chunk: dict[str, Any]) -> bytes:
        if self._sse:
            return b"data: " + encode(chunk) + b"\r\n\r\n"
        head = b"," if self._sent else b""
        self._sent = True
        return head + encode(chunk) + b"\n"

    def _parts(self, parts: list[dict[str, Any]]) -> list[bytes]:
        return [self._frame(_chunk(self._model_id, self._id, parts))] if parts else []

    def _flush_call(self) -> list[dict[str, Any]]:
        call, self._call = self._call, None
        return [] if call is None else [{"functionCall": {"id": call.id, "name": call.name, "args": _args(call)}}]

    def start(self) -> list[bytes]:
        return [] if self._sse else [b"["]

    def write(self, raw: dict[str, Any], events: list[c.Event]) -> list[bytes]:
        return [frame for event in events for frame in self.event(event)]

    def event(self, event: c.Event) -> list[bytes]:
        if isinstance(event, c.ToolArgumentsDelta) and self._call is not None:
            self._call.arguments += event.fragment
            return []
        parts = self._flush_call()
        if isinstance(event, c.ToolCallStarted):
            self._call = c.ToolCall(event.id, event.name, "", event.namespace, event.custom)
        elif isinstance(event, c.TextDelta) and event.text:
            parts.append({"text": event.text})
        elif isinstance(event, c.ThinkingDelta) and event.text and self._include:
            parts.append({"text": event.text, "thought": True})
        elif isinstance(event, c.ThinkingSealed):
            sealed = c.Thinking("", event.signature, event.redacted, event.item_id, event.encrypted)
            if (thought := _thought(sealed, False)) is not None:
                parts.append(thought)
        elif isinstance(event, c.Finished):
            self._finish = event
        return self._parts(parts)

    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]:
        finish = self._finish or c.Finished("stop")
        parts = self._flush_call()
        chunk = _chunk(self._model_id, self._id, parts or None, _FINISH.get(finish.reason, "STOP"))
        chunk["usageMetadata"] = {**usage_metadata(usage, reasoning_tokens), **extra_usage}
        return [self._frame(chunk)] + ([] if self._sse else [b"]"])

    def error(self, exc: GatewayError) -> list[bytes]:
        return [self._frame(exc.gemini_body())] + ([] if self._sse else [b"]"])
