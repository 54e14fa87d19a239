"""An Anthropic Messages upstream's side: canonical requests → its wire, its answers → canonical.

Also what the pass-through reads of a Messages answer (its usage, its events' text), since a
request passed through is billed from the same readings.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from app.errors import InvalidRequest
from app.json import object_or
from app.translate import canonical as c
from app.translate.images import SUPPORTED_MEDIA_TYPES
from app.translate.messages.client import arguments_object
from app.translate.tools import ToolNames
from domain.usage import TokenUsage, tool_calls_of

_STOP_IN: dict[object, c.Finish] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


#: Anthropic's count of a server tool's calls (``usage.server_tool_use``) → the tool a fee is priced for.
_SERVER_TOOLS = {"web_search_requests": "web_search", "web_fetch_requests": "web_fetch"}


def usage_from_anthropic(usage: Any) -> TokenUsage | None:
    """Usage as Anthropic reports it. Unlike OpenAI's, its ``input_tokens`` leave the cache out:
    ``cache_creation_input_tokens`` (every write, of whichever lifetime; ``cache_creation`` splits
    them into 5-minute and 1-hour writes, billed at different rates) and ``cache_read_input_tokens``
    are counted beside it, and each is billed once, at its own rate. Server tools' calls
    (``server_tool_use``) and the tier served (``service_tier``) are read too. In a stream the
    counts are cumulative: the last report stands for all of it (summing the reports bills cache
    writes twice)."""
    if not isinstance(usage, dict):
        return None

    def count(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    writes = count(usage.get("cache_creation_input_tokens"))
    split = usage.get("cache_creation")
    hour = min(count(split.get("ephemeral_1h_input_tokens")), writes) if isinstance(split, dict) else 0
    if isinstance(split, dict) and not writes:  # only the split was reported
        hour = count(split.get("ephemeral_1h_input_tokens"))
        writes = count(split.get("ephemeral_5m_input_tokens")) + hour
    server = usage.get("server_tool_use")
    calls = (
        {tool: count(server.get(field)) for field, tool in _SERVER_TOOLS.items()} if isinstance(server, dict) else {}
    )
    tier = usage.get("service_tier")
    return TokenUsage(
        input_tokens=count(usage.get("input_tokens")),
        output_tokens=count(usage.get("output_tokens")),
        cache_write_tokens=writes - hour,
        cache_hit_tokens=count(usage.get("cache_read_input_tokens")),
        cache_write_1h_tokens=hour,
        service_tier=tier if isinstance(tier, str) else "",
        tool_calls=tool_calls_of(calls),
    )


def thinking_tokens(usage: Any) -> int:
    details = usage.get("output_tokens_details") if isinstance(usage, dict) else None
    value = details.get("thinking_tokens") if isinstance(details, dict) else None
    return value if isinstance(value, int) and value > 0 else 0


# -- requests ------------------------------------------------------------------------------------


def _media(part: c.Text | c.Image | c.File) -> dict[str, Any]:
    if isinstance(part, c.Text):
        return {
            "type": "text",
            "text": part.text,
            **({"cache_control": part.cache_control} if part.cache_control else {}),
        }
    if isinstance(part, c.File):
        source = (
            {"type": "url", "url": part.url}
            if part.url
            else {"type": "base64", "media_type": part.media_type or "application/pdf", "data": part.data}
        )
        return {"type": "document", "source": source, **({"title": part.filename} if part.filename else {})}
    if part.url:
        block: dict[str, Any] = {"type": "image", "source": {"type": "url", "url": part.url}}
    elif part.media_type not in SUPPORTED_MEDIA_TYPES:
        raise InvalidRequest(
            f"Unsupported image type {part.media_type!r}: use one of {', '.join(SUPPORTED_MEDIA_TYPES)}."
        )
    else:
        block = {"type": "image", "source": {"type": "base64", "media_type": part.media_type, "data": part.data}}
    return {**block, **({"cache_control": part.cache_control} if part.cache_control else {})}


def _content(parts: list[c.Part], role: str, names: ToolNames) -> list[dict[str, Any]]:
    results = [p for p in parts if isinstance(p, c.ToolResult)]
    others = [p for p in parts if not isinstance(p, c.ToolResult)]
    if role == "assistant":  # thinking first, then text, then tool calls
        others.sort(key=lambda p: 0 if isinstance(p, c.Thinking) else 2 if isinstance(p, c.ToolCall) else 1)
    blocks: list[dict[str, Any]] = []
    for r in results:  # tool results must lead the message that follows the tool calls
        blocks.append(
            {
                "type": "tool_result",
                "tool_use_id": c.safe_tool_id(r.call_id),
                "content": [_media(x) for x in r.content],
                **({"is_error": True} if r.is_error else {}),
            }
        )
    for p in others:
        if isinstance(p, c.Text):
            if p.text:
                blocks.append(_media(p))
        elif isinstance(p, c.Image | c.File):
            blocks.append(_media(p))
        elif isinstance(p, c.Thinking):
            if p.redacted:  # Anthropic only takes back thinking it signed
                blocks.append({"type": "redacted_thinking", "data": p.redacted})
            elif p.signature:
                blocks.append({"type": "thinking", "thinking": p.text, "signature": p.signature})
        elif isinstance(p, c.ToolCall):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": c.safe_tool_id(p.id),
                    "name": names.upstream_name(p.name, p.namespace),
                    "input": arguments_object(p),
                }
            )
    return blocks or [{"type": "text", "text": "(empty)"}]


def _system(req: c.Request) -> list[dict[str, Any]]:
    """Every system text, the top-level one and those from the middle of the conversation, hoisted
    (as Anthropic's own OpenAI compatibility does), each block keeping its cache breakpoint."""
    texts = [*req.system, *(p for m in req.messages if m.role == "system" for p in m.parts if isinstance(p, c.Text))]
    return [_media(t) for t in texts if t.text]


def _thinks(req: c.Request, max_tokens: int) -> bool:
    """Whether to turn thinking on: the client asked for effort, there is room for a budget, and the
    conversation's last assistant turn, if it called tools, carries Anthropic's thinking (Anthropic
    refuses thinking on for a tool loop whose last turn has none, e.g. history from another model)."""
    if c.THINKING_BUDGETS.get(req.effort or "") is None or max_tokens <= 1024 or req.thinking == "disabled":
        return False
    last = next((m for m in reversed(req.messages) if m.role == "assistant"), None)
    if last is None or not any(isinstance(p, c.ToolCall) for p in last.parts):
        return True
    return any(isinstance(p, c.Thinking) and p.anthropic for p in last.parts)


def canonical_to_messages_body(
    req: c.Request, upstream_model: str, max_output_tokens: int, names: ToolNames
) -> dict[str, Any]:
    max_tokens = req.max_output_tokens or max_output_tokens
    body: dict[str, Any] = {
        "model": upstream_model,
        "max_tokens": max_tokens,
        "messages": [
            {"role": m.role, "content": _content(m.parts, m.role, names)} for m in req.messages if m.role != "system"
        ],
    }
    system = _system(req)
    if system:
        body["system"] = system if any("cache_control" in b for b in system) else "\n".join(b["text"] for b in system)
    if _thinks(req, max_tokens):
        budget = c.THINKING_BUDGETS[req.effort or "medium"]
        body["thinking"] = {"type": "enabled", "budget_tokens": max(1024, min(budget, max_tokens - 1))}
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
    _add_tools(body, req, names)
    schema = (req.response_format or {}).get("json_schema") or {}
    if schema.get("schema"):
        body["output_config"] = {"format": {"type": "json_schema", "schema": schema["schema"]}}
    if req.user:
        body["metadata"] = {"user_id": req.user}
    if req.stream:
        body["stream"] = True
    return body


def _add_tools(body: dict[str, Any], req: c.Request, names: ToolNames) -> None:
    """The request's tools (its functions, then the built-ins the model's policy passes on) and
    how the model must use them; nothing when there are none."""
    tools: list[dict[str, Any]] = []
    for tool in req.tools:
        name, description, parameters = names.definition(tool)
        spec: dict[str, Any] = {"name": name, "input_schema": parameters}
        if description:
            spec["description"] = description
        if tool.cache_control:
            spec["cache_control"] = tool.cache_control
        tools.append(spec)
    tools.extend(b.spec for b in req.builtin_tools)
    if not tools:
        return
    body["tools"] = tools
    choice: dict[str, Any] | None = None
    if isinstance(req.tool_choice, c.NamedTool):
        choice = {"type": "tool", "name": names.upstream_name(req.tool_choice.name, req.tool_choice.namespace)}
    elif req.tool_choice is not None:
        choice = {"type": {"auto": "auto", "required": "any", "none": "none"}[req.tool_choice]}
    if req.parallel_tool_calls is False:
        choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
    if choice:
        body["tool_choice"] = choice


# -- answers -------------------------------------------------------------------------------------


def message_to_canonical(answer: dict[str, Any]) -> c.Response:
    parts: list[c.Text | c.ToolCall | c.Thinking] = []
    for block in answer.get("content") or []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(c.Text(str(block.get("text", ""))))
        elif kind == "tool_use":
            parts.append(c.ToolCall(str(block.get("id")), str(block.get("name")), json.dumps(block.get("input") or {})))
        elif kind == "thinking":
            parts.append(c.Thinking(str(block.get("thinking", "")), block.get("signature")))
        elif kind == "redacted_thinking":
            parts.append(c.Thinking("", redacted=str(block.get("data") or "")))
    usage = answer.get("usage")
    return c.Response(
        id=str(answer.get("id") or ""),
        model=str(answer.get("model") or ""),
        parts=parts,
        finish=_STOP_IN.get(answer.get("stop_reason"), "stop"),
        stop_sequence=answer.get("stop_sequence"),
        usage=usage_from_anthropic(usage),
        reasoning_tokens=thinking_tokens(usage),
    )


#: A content block's delta, by its type, as its canonical event (other types carry nothing to relay).
_DELTAS: dict[str, Callable[[dict[str, Any]], c.Event]] = {
    "text_delta": lambda delta: c.TextDelta(str(delta.get("text", ""))),
    "input_json_delta": lambda delta: c.ToolArgumentsDelta(str(delta.get("partial_json", ""))),
    "thinking_delta": lambda delta: c.ThinkingDelta(str(delta.get("thinking", ""))),
    "signature_delta": lambda delta: c.ThinkingSealed(signature=str(delta.get("signature", ""))),
}


class MessagesEventReader:
    """Upstream Messages SSE events → canonical events (usage is cumulative across events)."""

    def __init__(self) -> None:
        self._usage: dict[str, Any] = {}

    def events(self, event: dict[str, Any]) -> list[c.Event]:
        kind = event.get("type")
        if kind == "message_start":
            message = object_or(event.get("message"), {})
            self._usage.update(message.get("usage") or {})
            usage = usage_from_anthropic(self._usage)
            return [c.UsageReported(usage, partial=True)] if usage is not None else []
        if kind == "content_block_start":
            block = object_or(event.get("content_block"), {})
            if block.get("type") == "tool_use":
                return [c.ToolCallStarted(str(block.get("id")), str(block.get("name")))]
            if block.get("type") == "text" and block.get("text"):
                return [c.TextDelta(str(block["text"]))]
            if block.get("type") == "redacted_thinking":
                return [c.ThinkingSealed(redacted=str(block.get("data") or ""))]
            return []
        if kind == "content_block_delta":
            delta = object_or(event.get("delta"), {})
            dkind = delta.get("type")
            read = _DELTAS.get(dkind) if isinstance(dkind, str) else None
            return [read(delta)] if read is not None else []
        if kind == "message_delta":
            self._usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
            delta = object_or(event.get("delta"), {})
            out: list[c.Event] = []
            if delta.get("stop_reason"):
                out.append(c.Finished(_STOP_IN.get(delta["stop_reason"], "stop"), delta.get("stop_sequence")))
            usage = usage_from_anthropic(self._usage)
            if usage is not None:
                out.append(c.UsageReported(usage, thinking_tokens(self._usage)))
            return out
        return []
