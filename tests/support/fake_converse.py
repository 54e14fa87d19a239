"""The fake Bedrock's Converse API: ``POST /model/{modelId}/converse`` and ``/converse-stream``, for
models other than Anthropic's (Llama, Mistral, Amazon Nova), signed and checked as InvokeModel is.

A Converse body (bedrock-runtime's shapes: ``messages`` of content blocks, ``system``, ``inferenceConfig``,
``toolConfig``) is checked as Bedrock checks it (an unknown key, a missing ``messages``: its 400
``ValidationException``), then served by the fake Anthropic as the equivalent Messages request, so the
same echo, token counts and ``[[directive]]`` markers hold (``[[tool:NAME]]``, ``[[status:429]]``,
``[[stream-error]]`` …). Its answer comes back in Converse's shape: ``output.message``, ``stopReason``,
``usage`` {inputTokens, outputTokens, totalTokens}, ``metrics``; a stream as event-stream messages each
named by ``:event-type`` (``messageStart``, ``contentBlockStart`` for a tool call,
``contentBlockDelta``, ``contentBlockStop``, ``messageStop``, ``metadata``), a mid-stream error as an
``exception`` message. boto3's ``converse`` and ``converse_stream`` read it (tests/e2e/test_fake_bedrock.py).
"""

from __future__ import annotations

import json
import time
from typing import Any

import msgspec

from tests.support.fake_bedrock import BedrockRefusal, _Reframed, frame
from tests.support.fake_upstream import Message, Send

_KEYS = frozenset(
    {
        "messages",
        "system",
        "inferenceConfig",
        "toolConfig",
        "guardrailConfig",
        "additionalModelRequestFields",
        "promptVariables",
        "additionalModelResponseFieldPaths",
        "requestMetadata",
        "performanceConfig",
    }
)
_STOPS = {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens", "stop_sequence": "stop_sequence"}


def _invalid(message: str) -> BedrockRefusal:
    return BedrockRefusal(400, "ValidationException", message)


def _block(block: Any) -> dict[str, Any] | None:
    """A Converse content block as the Messages block it stands for (reasoning is left out)."""
    if not isinstance(block, dict) or len(block) != 1:
        raise _invalid("Malformed input request: a content block must have exactly one member")
    ((kind, value),) = block.items()
    if kind == "text":
        return {"type": "text", "text": value}
    if kind == "image":
        source = {"type": "base64", "media_type": f"image/{value['format']}", "data": value["source"]["bytes"]}
        return {"type": "image", "source": source}
    if kind == "toolUse":
        return {"type": "tool_use", "id": value["toolUseId"], "name": value["name"], "input": value["input"]}
    if kind == "toolResult":
        content = [
            {"type": "text", "text": c["text"] if "text" in c else json.dumps(c["json"])} for c in value["content"]
        ]
        result = {"type": "tool_result", "tool_use_id": value["toolUseId"], "content": content}
        return {**result, **({"is_error": True} if value.get("status") == "error" else {})}
    if kind == "reasoningContent":
        return None
    raise _invalid(f"Malformed input request: unknown content block {kind}")


def anthropic_body(raw: bytes, model: str, stream: bool) -> dict[str, Any]:
    """The Messages request a Converse body stands for, after Bedrock's checks of it."""
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise _invalid("Malformed input request, please reformat your input and try again.") from None
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise _invalid("1 validation error detected: Value null at 'messages' failed to satisfy constraint")
    extra = sorted(set(body) - _KEYS)
    if extra:
        raise _invalid(f"Malformed input request: extraneous key [{extra[0]}] is not permitted")
    config = body.get("inferenceConfig") or {}
    out: dict[str, Any] = {"model": model, "max_tokens": config.get("maxTokens", 4096), "messages": []}
    try:
        for message in body["messages"]:
            blocks = [b for b in (_block(block) for block in message["content"]) if b is not None]
            out["messages"].append({"role": message["role"], "content": blocks})
    except (KeyError, TypeError):
        raise _invalid("Malformed input request: a message or content block is missing a member") from None
    if body.get("system"):
        out["system"] = "\n".join(block["text"] for block in body["system"])
    for name, field in (("temperature", "temperature"), ("topP", "top_p"), ("stopSequences", "stop_sequences")):
        if name in config:
            out[field] = config[name]
    tools = body.get("toolConfig")
    if tools:
        specs = [tool["toolSpec"] for tool in tools["tools"]]
        out["tools"] = [{"name": s["name"], "input_schema": s["inputSchema"]["json"], **_described(s)} for s in specs]
        choice = tools.get("toolChoice") or {}
        if "any" in choice:
            out["tool_choice"] = {"type": "any"}
        elif "tool" in choice:
            out["tool_choice"] = {"type": "tool", "name": choice["tool"]["name"]}
    return {**out, **({"stream": True} if stream else {})}


def _described(spec: dict[str, Any]) -> dict[str, Any]:
    return {"description": spec["description"]} if spec.get("description") else {}


def _usage(usage: dict[str, Any]) -> dict[str, int]:
    inputs, outputs = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    out = {"inputTokens": inputs, "outputTokens": outputs, "totalTokens": inputs + outputs}
    if usage.get("cache_read_input_tokens"):
        out["cacheReadInputTokens"] = usage["cache_read_input_tokens"]
    if usage.get("cache_creation_input_tokens"):
        out["cacheWriteInputTokens"] = usage["cache_creation_input_tokens"]
    return out


def converse_answer(message: dict[str, Any], elapsed_ms: int) -> dict[str, Any]:
    """A Messages answer as Converse's."""
    content: list[dict[str, Any]] = []
    for block in message.get("content", []):
        if block["type"] == "text":
            content.append({"text": block["text"]})
        elif block["type"] == "tool_use":
            content.append({"toolUse": {"toolUseId": block["id"], "name": block["name"], "input": block["input"]}})
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": _STOPS.get(message.get("stop_reason") or "", "end_turn"),
        "usage": _usage(message.get("usage") or {}),
        "metrics": {"latencyMs": elapsed_ms},
    }


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return frame({":event-type": name, ":message-type": "event"}, payload)


class Conversed(_Reframed):
    """The fake Anthropic's answer in Converse's shape (an error as Bedrock's, as InvokeModel's are)."""

    def __init__(self, send: Send, stream: bool) -> None:
        super().__init__(send, stream)
        self._stop = "end_turn"
        self._tools: set[int] = set()

    async def __call__(self, message: Message) -> None:
        if self._stream or self._status != 200 or message["type"] != "http.response.body":
            if message["type"] == "http.response.start" and message["status"] == 200 and not self._stream:
                self._status = 200
                return None  # the length changes: the start goes with the body
            return await super().__call__(message)
        self._pending += message.get("body", b"")
        if message.get("more_body"):
            return None
        answer = msgspec.json.encode(converse_answer(msgspec.json.decode(self._pending), self._elapsed()))
        headers = [(b"content-type", b"application/json"), (b"x-amzn-requestid", b"fake")]
        await self._send({"type": "http.response.start", "status": 200, "headers": headers})
        await self._send({"type": "http.response.body", "body": answer})

    def _elapsed(self) -> int:
        return int((time.monotonic() - self._started) * 1000)

    def _frame(self, event: bytes) -> bytes:
        data = next(line[6:] for line in event.split(b"\n") if line.startswith(b"data: "))
        value = msgspec.json.decode(data)
        kind, index = value.get("type"), value.get("index", 0)
        if kind == "error":
            error = value["error"]
            name = "throttlingException" if error.get("type") == "rate_limit_error" else "modelStreamErrorException"
            return frame({":message-type": "exception", ":exception-type": name}, {"message": error["message"]})
        if kind == "message_start":
            self._usage.update(value["message"].get("usage") or {})
            return _event("messageStart", {"role": "assistant"})
        if kind == "content_block_start" and value["content_block"]["type"] == "tool_use":
            block = value["content_block"]
            start = {"toolUse": {"toolUseId": block["id"], "name": block["name"]}}
            return _event("contentBlockStart", {"contentBlockIndex": index, "start": start})
        if kind == "content_block_delta":
            delta = value["delta"]
            if delta["type"] == "text_delta":
                return _event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": delta["text"]}})
            if delta["type"] == "input_json_delta":
                tool = {"toolUse": {"input": delta["partial_json"]}}
                return _event("contentBlockDelta", {"contentBlockIndex": index, "delta": tool})
            return b""
        if kind == "content_block_stop":
            return _event("contentBlockStop", {"contentBlockIndex": index})
        if kind == "message_delta":
            self._usage.update(value.get("usage") or {})
            self._stop = _STOPS.get(value.get("delta", {}).get("stop_reason") or "", "end_turn")
            return b""
        if kind == "message_stop":
            metadata = {"usage": _usage(self._usage), "metrics": {"latencyMs": self._elapsed()}}
            return _event("messageStop", {"stopReason": self._stop}) + _event("metadata", metadata)
        return b""
