"""Anthropic Messages ↔ canonical, in both directions."""

from __future__ import annotations

import json
import secrets
from typing import Any

from app.errors import GatewayError, InvalidRequest
from app.json import encode
from app.translate import canonical as c
from app.translate.images import SUPPORTED_MEDIA_TYPES
from domain.pricing import TokenUsage

_STOP_IN = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
            "model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter"}
_STOP_OUT = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}


def stop_reason(finish: str, stop_sequence: str | None) -> str:
    return "stop_sequence" if stop_sequence else _STOP_OUT.get(finish, "end_turn")


def usage_from_anthropic(usage: Any) -> TokenUsage | None:
    if not isinstance(usage, dict):
        return None

    def count(name: str) -> int:
        value = usage.get(name)
        return value if isinstance(value, int) and value > 0 else 0

    return TokenUsage(
        input_tokens=count("input_tokens"),
        output_tokens=count("output_tokens"),
        cache_write_tokens=count("cache_creation_input_tokens"),
        cache_hit_tokens=count("cache_read_input_tokens"),
    )


def usage_dict(usage: TokenUsage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_hit_tokens,
    }


# -- inbound: a client's Messages request, and what we answer it --------------------------------


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list) and all(isinstance(b, dict) for b in content):
        return content
    raise InvalidRequest(f"{where}.content: expected a string or an array of content blocks.")


def _image_in(block: dict[str, Any], where: str) -> c.Image:
    source = block.get("source") or {}
    if source.get("type") == "url":
        return c.Image(url=str(source.get("url")))
    if source.get("type") == "base64":
        return c.Image(media_type=source.get("media_type"), data=source.get("data"))
    raise InvalidRequest(f"{where}: unsupported image source {source.get('type')!r}.")


def _result_content(content: Any, where: str) -> list[c.Text | c.Image]:
    if content is None:
        return []
    out: list[c.Text | c.Image] = []
    for block in _blocks(content, where):
        if block.get("type") == "text":
            out.append(c.Text(str(block.get("text", ""))))
        elif block.get("type") == "image":
            out.append(_image_in(block, where))
    return out


def messages_request_to_canonical(body: dict[str, Any]) -> c.Request:
    system_field = body.get("system")
    system = [c.Text(b.get("text", "")) for b in _blocks(system_field, "system")] if system_field else []
    messages: list[c.Message] = []
    for i, m in enumerate(body.get("messages") or []):
        where = f"messages.{i}"
        role = m.get("role")
        if role not in ("user", "assistant"):
            raise InvalidRequest(f"{where}.role: expected 'user' or 'assistant'.")
        parts: list[c.Part] = []
        for block in _blocks(m.get("content"), where):
            kind = block.get("type")
            if kind == "text":
                parts.append(c.Text(str(block.get("text", ""))))
            elif kind == "image":
                parts.append(_image_in(block, where))
            elif kind == "tool_use":
                parts.append(c.ToolCall(str(block.get("id")), str(block.get("name")), json.dumps(block.get("input") or {})))
            elif kind == "tool_result":
                parts.append(c.ToolResult(str(block.get("tool_use_id")), _result_content(block.get("content"), where),
                                          bool(block.get("is_error"))))
            elif kind == "thinking":
                parts.append(c.Thinking(str(block.get("thinking", "")), block.get("signature")))
            elif kind == "redacted_thinking":
                continue
            else:
                raise InvalidRequest(f"{where}: content blocks of type {kind!r} are not supported for this model.")
        c.append_turn(messages, role, parts)
    thinking = body.get("thinking") or {}
    output_config = body.get("output_config") if isinstance(body.get("output_config"), dict) else {}
    effort = output_config.get("effort")
    if effort is None and isinstance(thinking, dict) and thinking.get("type") == "enabled":
        effort = c.effort_from_budget(int(thinking.get("budget_tokens") or 0))
    fmt = output_config.get("format") if isinstance(output_config.get("format"), dict) else None
    response_format = None
    if fmt and fmt.get("type") == "json_schema":
        response_format = {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt.get("schema") or {}}}
    choice = body.get("tool_choice") or {}
    kinds = {"auto": "auto", "any": "required", "none": "none"}
    tool_choice: c.ToolChoice | None = (
        c.NamedTool(str(choice.get("name"))) if choice.get("type") == "tool" else kinds.get(choice.get("type"))  # type: ignore[assignment]
    )
    stop = body.get("stop_sequences") or []
    return c.Request(
        model=str(body.get("model")),
        system=system,
        messages=messages,
        max_output_tokens=body.get("max_tokens"),
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        top_k=body.get("top_k"),
        stop=[stop] if isinstance(stop, str) else list(stop),
        tools=[c.Tool(str(t.get("name")), t.get("description"), t.get("input_schema") or {})
               for t in body.get("tools") or [] if isinstance(t, dict) and "input_schema" in t],
        tool_choice=tool_choice,
        parallel_tool_calls=False if choice.get("disable_parallel_tool_use") else None,
        effort=effort,
        response_format=response_format,
        user=(body.get("metadata") or {}).get("user_id"),
        stream=bool(body.get("stream")),
    )


def _block_out(part: c.Text | c.ToolCall | c.Thinking) -> dict[str, Any]:
    if isinstance(part, c.Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, c.Thinking):
        return {"type": "thinking", "thinking": part.text, "signature": part.signature or ""}
    return {"type": "tool_use", "id": c.safe_tool_id(part.id), "name": part.name, "input": _arguments(part.arguments)}


def _arguments(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {"arguments": arguments}
    return value if isinstance(value, dict) else {"value": value}


def canonical_to_message(resp: c.Response, model_id: str, extra_usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_" + secrets.token_hex(12),
        "type": "message",
        "role": "assistant",
        "model": model_id,
        "content": [_block_out(p) for p in resp.parts],
        "stop_reason": stop_reason(resp.finish, resp.stop_sequence),
        "stop_sequence": resp.stop_sequence,
        "usage": {**(usage_dict(resp.usage) if resp.usage else {}), **extra_usage},
    }


def sse(event: dict[str, Any]) -> bytes:
    return b"event: " + event["type"].encode() + b"\ndata: " + encode(event) + b"\n\n"


class MessagesStreamWriter:
    """Canonical stream events → Messages SSE frames, each with its ``event:`` line."""

    def __init__(self, model_id: str, input_tokens_estimate: int) -> None:
        self._model_id = model_id
        self._estimate = input_tokens_estimate
        self._index = -1
        self._open: str | None = None
        self._finish: c.Finished | None = None
        self._pinged = False

    def start(self) -> list[bytes]:
        message = {"id": "msg_" + secrets.token_hex(12), "type": "message", "role": "assistant", "content": [],
                   "model": self._model_id, "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": self._estimate, "output_tokens": 1}}
        return [sse({"type": "message_start", "message": message})]

    def _open_block(self, kind: str, block: dict[str, Any]) -> list[bytes]:
        frames = self._close_block()
        self._index += 1
        self._open = kind
        frames.append(sse({"type": "content_block_start", "index": self._index, "content_block": block}))
        if not self._pinged:
            self._pinged = True
            frames.append(sse({"type": "ping"}))
        return frames

    def _close_block(self) -> list[bytes]:
        if self._open is None:
            return []
        self._open = None
        return [sse({"type": "content_block_stop", "index": self._index})]

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return sse({"type": "content_block_delta", "index": self._index, "delta": delta})

    def event(self, event: c.Event) -> list[bytes]:
        if isinstance(event, c.TextDelta) and event.text:
            frames = [] if self._open == "text" else self._open_block("text", {"type": "text", "text": ""})
            return [*frames, self._delta({"type": "text_delta", "text": event.text})]
        if isinstance(event, c.ThinkingDelta) and event.text:
            frames = [] if self._open == "thinking" else self._open_block(
                "thinking", {"type": "thinking", "thinking": "", "signature": ""})
            return [*frames, self._delta({"type": "thinking_delta", "thinking": event.text})]
        if isinstance(event, c.SignatureDelta) and self._open == "thinking":
            return [self._delta({"type": "signature_delta", "signature": event.signature})]
        if isinstance(event, c.ToolCallStarted):
            return self._open_block("tool_use", {"type": "tool_use", "id": c.safe_tool_id(event.id),
                                                 "name": event.name, "input": {}})
        if isinstance(event, c.ToolArgumentsDelta) and self._open == "tool_use":
            return [self._delta({"type": "input_json_delta", "partial_json": event.fragment})]
        if isinstance(event, c.Finished):
            self._finish = event
            return self._close_block()
        return []

    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]:
        finish = self._finish or c.Finished("stop")
        frames = self._close_block()
        frames.append(sse({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(finish.reason, finish.stop_sequence), "stop_sequence": finish.stop_sequence},
            "usage": {**usage_dict(usage), **extra_usage},
        }))
        frames.append(sse({"type": "message_stop"}))
        return frames

    def error(self, exc: GatewayError) -> list[bytes]:
        return [sse(exc.anthropic_body())]


# -- outbound: an Anthropic upstream ------------------------------------------------------------


def _content_out(parts: list[c.Part], role: str) -> list[dict[str, Any]]:
    results = [p for p in parts if isinstance(p, c.ToolResult)]
    others = [p for p in parts if not isinstance(p, c.ToolResult)]
    if role == "assistant":  # thinking first, then text, then tool calls
        others.sort(key=lambda p: 0 if isinstance(p, c.Thinking) else 2 if isinstance(p, c.ToolCall) else 1)
    blocks: list[dict[str, Any]] = []
    for r in results:  # tool results must lead the message that follows the tool calls
        blocks.append({"type": "tool_result", "tool_use_id": c.safe_tool_id(r.call_id),
                       "content": [_media_out(x) for x in r.content], **({"is_error": True} if r.is_error else {})})
    for p in others:
        if isinstance(p, c.Text):
            if p.text:
                blocks.append({"type": "text", "text": p.text})
        elif isinstance(p, c.Image):
            blocks.append(_media_out(p))
        elif isinstance(p, c.Thinking):
            if p.signature:  # Anthropic only takes back thinking it signed
                blocks.append({"type": "thinking", "thinking": p.text, "signature": p.signature})
        elif isinstance(p, c.ToolCall):
            blocks.append(_block_out(p))
    return blocks or [{"type": "text", "text": "(empty)"}]


def _media_out(part: c.Text | c.Image) -> dict[str, Any]:
    if isinstance(part, c.Text):
        return {"type": "text", "text": part.text}
    if part.url:
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    if part.media_type not in SUPPORTED_MEDIA_TYPES:
        raise InvalidRequest(f"Unsupported image type {part.media_type!r}: use one of {', '.join(SUPPORTED_MEDIA_TYPES)}.")
    return {"type": "image", "source": {"type": "base64", "media_type": part.media_type, "data": part.data}}


def canonical_to_messages_body(req: c.Request, upstream_model: str, max_output_tokens: int) -> dict[str, Any]:
    max_tokens = req.max_output_tokens or max_output_tokens
    body: dict[str, Any] = {
        "model": upstream_model,
        "max_tokens": max_tokens,
        "messages": [{"role": m.role, "content": _content_out(m.parts, m.role)} for m in req.messages],
    }
    if req.system:
        body["system"] = "\n".join(t.text for t in req.system)
    budget = c.THINKING_BUDGETS.get(req.effort or "")
    thinking = budget is not None and max_tokens > 1024
    if thinking:
        body["thinking"] = {"type": "enabled", "budget_tokens": max(1024, min(budget, max_tokens - 1))}  # type: ignore[type-var]
    else:  # Anthropic refuses temperature and top_k alongside thinking
        if req.temperature is not None:
            body["temperature"] = min(req.temperature, 1.0)
        if req.top_k is not None:
            body["top_k"] = req.top_k
    if req.top_p is not None:
        body["top_p"] = req.top_p
    stops = [s for s in req.stop if s.strip()]
    if stops:
        body["stop_sequences"] = stops
    if req.tools:
        body["tools"] = [{"name": t.name, **({"description": t.description} if t.description else {}),
                          "input_schema": t.parameters or {"type": "object", "properties": {}}} for t in req.tools]
        choice: dict[str, Any] | None = None
        if isinstance(req.tool_choice, c.NamedTool):
            choice = {"type": "tool", "name": req.tool_choice.name}
        elif req.tool_choice is not None:
            choice = {"type": {"auto": "auto", "required": "any", "none": "none"}[req.tool_choice]}
        if req.parallel_tool_calls is False:
            choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
        if choice:
            body["tool_choice"] = choice
    schema = (req.response_format or {}).get("json_schema") or {}
    if schema.get("schema"):
        body["output_config"] = {"format": {"type": "json_schema", "schema": schema["schema"]}}
    if req.user:
        body["metadata"] = {"user_id": req.user}
    if req.stream:
        body["stream"] = True
    return body


def message_to_canonical(answer: dict[str, Any]) -> c.Response:
    parts: list[c.Text | c.ToolCall | c.Thinking] = []
    for block in answer.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(c.Text(str(block.get("text", ""))))
        elif kind == "tool_use":
            parts.append(c.ToolCall(str(block.get("id")), str(block.get("name")), json.dumps(block.get("input") or {})))
        elif kind == "thinking":
            parts.append(c.Thinking(str(block.get("thinking", "")), block.get("signature")))
    usage = answer.get("usage") or {}
    details = usage.get("output_tokens_details") or {}
    return c.Response(
        id=str(answer.get("id") or ""),
        model=str(answer.get("model") or ""),
        parts=parts,
        finish=_STOP_IN.get(answer.get("stop_reason"), "stop"),  # type: ignore[arg-type]
        stop_sequence=answer.get("stop_sequence"),
        usage=usage_from_anthropic(usage),
        reasoning_tokens=int(details.get("thinking_tokens") or 0) if isinstance(details, dict) else 0,
    )


class MessagesEventReader:
    """Upstream Messages SSE events → canonical events (usage is cumulative across events)."""

    def __init__(self) -> None:
        self._usage: dict[str, Any] = {}

    def events(self, event: dict[str, Any]) -> list[c.Event]:
        kind = event.get("type")
        if kind == "message_start":
            self._usage.update((event.get("message") or {}).get("usage") or {})
            usage = usage_from_anthropic(self._usage)
            return [c.UsageReported(usage, partial=True)] if usage is not None else []
        if kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                return [c.ToolCallStarted(str(block.get("id")), str(block.get("name")))]
            if block.get("type") == "text" and block.get("text"):
                return [c.TextDelta(str(block["text"]))]
            return []
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            dkind = delta.get("type")
            if dkind == "text_delta":
                return [c.TextDelta(str(delta.get("text", "")))]
            if dkind == "input_json_delta":
                return [c.ToolArgumentsDelta(str(delta.get("partial_json", "")))]
            if dkind == "thinking_delta":
                return [c.ThinkingDelta(str(delta.get("thinking", "")))]
            if dkind == "signature_delta":
                return [c.SignatureDelta(str(delta.get("signature", "")))]
            return []
        if kind == "message_delta":
            self._usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
            delta = event.get("delta") or {}
            out: list[c.Event] = []
            if delta.get("stop_reason"):
                out.append(c.Finished(_STOP_IN.get(delta["stop_reason"], "stop"), delta.get("stop_sequence")))  # type: ignore[arg-type]
            usage = usage_from_anthropic(self._usage)
            if usage is not None:
                out.append(c.UsageReported(usage))
            return out
        return []
