"""An Anthropic Messages client's side: its request → canonical, and canonical answers → its wire.

Used only when the model's upstream speaks another protocol (a Messages request to an Anthropic
upstream passes through untouched, whatever it carries).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from app.errors import GatewayError, InvalidRequest
from app.json import encode
from app.translate import canonical as c
from app.translate import fields as f
from app.translate import reasoning
from app.translate.tools import builtin_name
from domain.usage import TokenUsage

_STOP_OUT = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}
#: Blocks that record what a provider's own tools did (its web searches, its code runs): another
#: provider cannot take them back, and the answer that followed them stays.
#: Anthropic's tool_choice types, as the canonical model's modes.
_TOOL_MODES_IN: dict[str, c.ToolMode] = {"auto": "auto", "any": "required", "none": "none"}
_SERVER_TOOL_BLOCK = ("server_tool_use", "mcp_tool_use", "mcp_tool_result", "container_upload")


def stop_reason(finish: str, stop_sequence: str | None) -> str:
    return "stop_sequence" if stop_sequence else _STOP_OUT.get(finish, "end_turn")


def usage_dict(usage: TokenUsage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.all_cache_writes,
        "cache_read_input_tokens": usage.cache_hit_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_write_tokens,
            "ephemeral_1h_input_tokens": usage.cache_write_1h_tokens,
        },
    }
    if usage.service_tier:
        out["service_tier"] = usage.service_tier
    return out


def blocks(content: Any, where: str) -> list[dict[str, Any]]:
    """A content field's blocks (``where``: the field); a string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return f.objects(content, where, ".{}")


def _cache_control(block: dict[str, Any], where: str) -> dict[str, Any] | None:
    return f.typed(block.get("cache_control"), dict, f"{where}.cache_control")


def _image(block: dict[str, Any], where: str) -> c.Image:
    source = f.present(block.get("source"), dict, f"{where}.source")
    if source.get("type") == "url":
        return c.Image(
            url=f.present(source.get("url"), str, f"{where}.source.url"), cache_control=_cache_control(block, where)
        )
    if source.get("type") == "base64":
        return c.Image(
            media_type=f.typed(source.get("media_type"), str, f"{where}.source.media_type"),
            data=f.present(source.get("data"), str, f"{where}.source.data"),
            cache_control=_cache_control(block, where),
        )
    raise InvalidRequest(
        f"{where}.source: images of source type {source.get('type')!r} can only go to an Anthropic upstream.",
        param=where,
    )


def _document(block: dict[str, Any], where: str) -> list[c.Text | c.Image | c.File]:
    """A document: its text where it has one (with its title and context), else the file."""
    source = f.present(block.get("source"), dict, f"{where}.source")
    title = f.typed(block.get("title"), str, f"{where}.title")
    heading = "\n".join(x for x in (title, f.typed(block.get("context"), str, f"{where}.context")) if x)
    kind = source.get("type")
    if kind == "text":
        return [c.Text("\n\n".join(x for x in (heading, f.text(source.get("data"), f"{where}.source.data")) if x))]
    if kind == "content":
        return [*([c.Text(heading)] if heading else []), *_contents(source.get("content"), f"{where}.source.content")]
    if kind == "base64":
        return [
            c.File(
                media_type=f.typed(source.get("media_type"), str, f"{where}.source.media_type"),
                data=f.present(source.get("data"), str, f"{where}.source.data"),
                filename=title,
            )
        ]
    if kind == "url":
        return [c.File(url=f.present(source.get("url"), str, f"{where}.source.url"), filename=title)]
    raise InvalidRequest(
        f"{where}.source: documents of source type {kind!r} can only go to an Anthropic upstream.", param=where
    )


def _search_result(block: dict[str, Any], where: str) -> c.Text:
    text = "".join(
        f.text(b.get("text"), f"{where}.content.{j}.text")
        for j, b in enumerate(f.objects(block.get("content"), f"{where}.content", ".{}"))
    )
    title, source = (f.typed(block.get(k), str, f"{where}.{k}") for k in ("title", "source"))
    return c.Text("\n".join(x for x in (title, source, text) if x))


def _block(block: dict[str, Any], where: str) -> list[c.Text | c.Image | c.File]:
    """A block of content (``where``: its path): text, an image, a document or a search result."""
    kind = block.get("type")
    if kind == "text":
        return [c.Text(f.text(block.get("text"), f"{where}.text"), _cache_control(block, where))]
    if kind == "image":
        return [_image(block, where)]
    if kind == "document":
        return _document(block, where)
    if kind == "search_result":
        return [_search_result(block, where)]
    return []


def _contents(content: Any, where: str) -> list[c.Text | c.Image | c.File]:
    """What a system prompt, a tool result or a document holds (``where``: that field)."""
    if content is None:
        return []
    return [part for j, block in enumerate(blocks(content, where)) for part in _block(block, f"{where}.{j}")]


def _parts(content: Any, where: str) -> list[c.Part]:
    parts: list[c.Part] = []
    for j, block in enumerate(blocks(content, f"{where}.content")):
        at = f"{where}.content.{j}"
        kind = block.get("type")
        if kind in ("text", "image", "document", "search_result"):
            parts.extend(_block(block, at))
        elif kind == "tool_use":
            parts.append(
                c.ToolCall(
                    f.present(block.get("id"), str, f"{at}.id"),
                    f.present(block.get("name"), str, f"{at}.name"),
                    json.dumps(f.typed(block.get("input"), dict, f"{at}.input") or {}),
                )
            )
        elif kind == "tool_result":
            parts.append(
                c.ToolResult(
                    f.present(block.get("tool_use_id"), str, f"{at}.tool_use_id"),
                    _contents(block.get("content"), f"{at}.content"),
                    bool(f.typed(block.get("is_error"), bool, f"{at}.is_error")),
                )
            )
        elif kind == "thinking":
            parts.append(
                reasoning.from_signature(
                    f.text(block.get("thinking"), f"{at}.thinking"),
                    f.typed(block.get("signature"), str, f"{at}.signature"),
                )
            )
        elif kind == "redacted_thinking":
            parts.append(c.Thinking("", redacted=f.present(block.get("data"), str, f"{at}.data")))
        elif kind in _SERVER_TOOL_BLOCK or str(kind).endswith("_tool_result"):
            continue
        else:
            raise InvalidRequest(
                f"{at}: content blocks of type {kind!r} can only go to an Anthropic upstream.", param=at
            )
    return parts


def _tool_choice(choice: Any, req: c.Request) -> None:
    if isinstance(choice, str):  # liberal: the bare form of the type
        choice = {"type": choice}
    if choice is None:
        return
    choice = f.present(choice, dict, "tool_choice")
    kind = choice.get("type")
    if kind == "tool":
        req.tool_choice = c.NamedTool(f.present(choice.get("name"), str, "tool_choice.name"))
    elif kind in ("auto", "any", "none"):
        req.tool_choice = _TOOL_MODES_IN[kind]
    if f.typed(choice.get("disable_parallel_tool_use"), bool, "tool_choice.disable_parallel_tool_use"):
        req.parallel_tool_calls = False


def _thinking(body: dict[str, Any], req: c.Request) -> None:
    thinking = f.field(body, "thinking", dict) or {}
    config = f.field(body, "output_config", dict) or {}
    req.effort = f.typed(config.get("effort"), str, "output_config.effort")
    kind = f.typed(thinking.get("type"), str, "thinking.type")
    if (mode := c.one_of(kind, c.THINKING_MODES)) is not None:
        req.thinking = mode
    if kind == "enabled" and req.effort is None:
        budget = f.typed(thinking.get("budget_tokens"), int, "thinking.budget_tokens") or 0
        req.effort = c.effort_from_budget(budget)
    if kind in ("enabled", "adaptive") and thinking.get("display") != "omitted":
        req.reasoning_summary = "auto"
    fmt = f.typed(config.get("format"), dict, "output_config.format")
    if fmt and fmt.get("type") == "json_schema":
        schema = f.typed(fmt.get("schema"), dict, "output_config.format.schema") or {}
        req.response_format = {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}


def messages_request_to_canonical(body: dict[str, Any]) -> c.Request:
    req = c.Request(model=str(body.get("model")), messages=[])
    system = body.get("system")
    if system:
        req.system = [p for p in _contents(system, "system") if isinstance(p, c.Text)]
    for i, m in enumerate(f.objects(body.get("messages"), "messages", ".{}")):
        where = f"messages.{i}"
        role = m.get("role")
        if role not in ("user", "assistant", "system"):
            raise InvalidRequest(f"{where}.role: expected 'user', 'assistant' or 'system'.", param=f"{where}.role")
        c.append_turn(req.messages, role, _parts(m.get("content"), where))
    for i, t in enumerate(f.objects(body.get("tools"), "tools", ".{}")):
        where = f"tools.{i}"
        if (name := builtin_name(t, "messages")) is not None:
            req.builtin_tools.append(c.BuiltinTool(name, t))
        else:
            req.tools.append(
                c.Tool(
                    f.present(t.get("name"), str, f"{where}.name"),
                    f.typed(t.get("description"), str, f"{where}.description"),
                    f.typed(t.get("input_schema"), dict, f"{where}.input_schema") or {},
                    strict=f.typed(t.get("strict"), bool, f"{where}.strict"),
                    cache_control=_cache_control(t, where),
                )
            )
    if body.get("mcp_servers"):
        req.builtin_tools.append(c.BuiltinTool("mcp_servers", {}))
    _tool_choice(body.get("tool_choice"), req)
    _thinking(body, req)
    metadata = f.field(body, "metadata", dict) or {}
    req.user = f.typed(metadata.get("user_id"), str, "metadata.user_id")
    req.max_output_tokens = f.field(body, "max_tokens", int)
    req.temperature = f.number(body, "temperature")
    req.top_p = f.number(body, "top_p")
    req.top_k = f.field(body, "top_k", int)
    req.stop = f.strings(body.get("stop_sequences"), "stop_sequences")
    req.stream = bool(body.get("stream"))
    return req


# -- answers -------------------------------------------------------------------------------------


def _block_out(part: c.Text | c.ToolCall | c.Thinking) -> dict[str, Any]:
    if isinstance(part, c.Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, c.Thinking):
        if part.redacted:
            return {"type": "redacted_thinking", "data": part.redacted}
        return {"type": "thinking", "thinking": part.text, "signature": reasoning.signature(part)}
    return {"type": "tool_use", "id": c.safe_tool_id(part.id), "name": part.name, "input": arguments_object(part)}


def arguments_object(call: c.ToolCall) -> dict[str, Any]:
    """A call's arguments as Anthropic's ``input`` object (a custom tool's text as ``{"input": …}``)."""
    if call.custom:
        return {"input": call.arguments}
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return {"arguments": call.arguments}
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
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + encode(event) + b"\n\n"


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
        message: dict[str, Any] = {
            "id": "msg_" + secrets.token_hex(12),
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": self._model_id,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self._estimate, "output_tokens": 1},
        }
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

    def write(self, raw: dict[str, Any], events: list[c.Event]) -> list[bytes]:
        return [frame for event in events for frame in self.event(event)]

    def event(self, event: c.Event) -> list[bytes]:
        if isinstance(event, c.TextDelta) and event.text:
            frames = [] if self._open == "text" else self._open_block("text", {"type": "text", "text": ""})
            return [*frames, self._delta({"type": "text_delta", "text": event.text})]
        if isinstance(event, c.ThinkingDelta) and event.text:
            frames = (
                []
                if self._open == "thinking"
                else self._open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            )
            return [*frames, self._delta({"type": "thinking_delta", "thinking": event.text})]
        if isinstance(event, c.ThinkingSealed):
            sealed = c.Thinking("", event.signature, event.redacted, event.item_id, event.encrypted)
            if sealed.redacted:
                return [
                    *self._open_block("redacted", {"type": "redacted_thinking", "data": sealed.redacted}),
                    *self._close_block(),
                ]
            frames = (
                []
                if self._open == "thinking"
                else self._open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            )
            return [
                *frames,
                self._delta({"type": "signature_delta", "signature": reasoning.signature(sealed)}),
                *self._close_block(),
            ]
        if isinstance(event, c.ToolCallStarted):
            return self._open_block(
                "tool_use", {"type": "tool_use", "id": c.safe_tool_id(event.id), "name": event.name, "input": {}}
            )
        if isinstance(event, c.ToolArgumentsDelta) and self._open == "tool_use":
            return [self._delta({"type": "input_json_delta", "partial_json": event.fragment})]
        if isinstance(event, c.Finished):
            self._finish = event
            return self._close_block()
        return []

    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]:
        finish = self._finish or c.Finished("stop")
        frames = self._close_block()
        frames.append(
            sse(
                {
                    "type": "message_delta",
                    "delta": {
                        "stop_reason": stop_reason(finish.reason, finish.stop_sequence),
                        "stop_sequence": finish.stop_sequence,
                    },
                    "usage": {**usage_dict(usage), **extra_usage},
                }
            )
        )
        frames.append(sse({"type": "message_stop"}))
        return frames

    def error(self, exc: GatewayError) -> list[bytes]:
        return [sse(exc.anthropic_body())]
