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
from domain.pricing import TokenUsage

_STOP_OUT = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}
#: Blocks that record what a provider's own tools did (its web searches, its code runs): another
#: provider cannot take them back, and the answer that followed them stays.
_SERVER_TOOL_BLOCK = ("server_tool_use", "mcp_tool_use", "mcp_tool_result", "container_upload")


def stop_reason(finish: str, stop_sequence: str | None) -> str:
    return "stop_sequence" if stop_sequence else _STOP_OUT.get(finish, "end_turn")


def usage_dict(usage: TokenUsage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_hit_tokens,
    }


def blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return f.objects(content, f"{where}.content")


def _image(block: dict[str, Any], where: str) -> c.Image:
    source = f.typed(block.get("source"), dict, f"{where}.source") or {}
    if source.get("type") == "url":
        return c.Image(url=str(source.get("url")), cache_control=block.get("cache_control"))
    if source.get("type") == "base64":
        return c.Image(media_type=source.get("media_type"), data=source.get("data"), cache_control=block.get("cache_control"))
    raise InvalidRequest(f"{where}.source: images of source type {source.get('type')!r} can only go to an "
                         "Anthropic upstream.", param=where)


def _document(block: dict[str, Any], where: str) -> list[c.Text | c.Image | c.File]:
    """A document: its text where it has one (with its title and context), else the file."""
    source = f.typed(block.get("source"), dict, f"{where}.source") or {}
    heading = "\n".join(str(block[k]) for k in ("title", "context") if isinstance(block.get(k), str))
    kind = source.get("type")
    if kind == "text":
        return [c.Text("\n\n".join(x for x in (heading, str(source.get("data") or "")) if x))]
    if kind == "content":
        return [*([c.Text(heading)] if heading else []), *_contents(source.get("content"), f"{where}.source")]
    if kind == "base64":
        return [c.File(media_type=source.get("media_type"), data=source.get("data"), filename=block.get("title"))]
    if kind == "url":
        return [c.File(url=str(source.get("url")), filename=block.get("title"))]
    raise InvalidRequest(f"{where}.source: documents of source type {kind!r} can only go to an Anthropic upstream.",
                         param=where)


def _search_result(block: dict[str, Any]) -> c.Text:
    text = "".join(str(b.get("text") or "") for b in block.get("content") or () if isinstance(b, dict))
    return c.Text("\n".join(str(x) for x in (block.get("title"), block.get("source"), text) if x))


def _contents(content: Any, where: str) -> list[c.Text | c.Image | c.File]:
    """What a tool result or a document holds: text, images, documents, search results."""
    if content is None:
        return []
    out: list[c.Text | c.Image | c.File] = []
    for j, block in enumerate(blocks(content, where)):
        kind = block.get("type")
        if kind == "text":
            out.append(c.Text(str(block.get("text") or ""), block.get("cache_control")))
        elif kind == "image":
            out.append(_image(block, f"{where}.{j}"))
        elif kind == "document":
            out.extend(_document(block, f"{where}.{j}"))
        elif kind == "search_result":
            out.append(_search_result(block))
    return out


def _parts(content: Any, where: str) -> list[c.Part]:
    parts: list[c.Part] = []
    for j, block in enumerate(blocks(content, where)):
        at = f"{where}.content.{j}"
        kind = block.get("type")
        if kind in ("text", "image", "document", "search_result"):
            parts.extend(_contents([block], where))
        elif kind == "tool_use":
            parts.append(c.ToolCall(str(block.get("id")), str(block.get("name")), json.dumps(block.get("input") or {})))
        elif kind == "tool_result":
            parts.append(c.ToolResult(str(block.get("tool_use_id")), _contents(block.get("content"), at),
                                      bool(block.get("is_error"))))
        elif kind == "thinking":
            parts.append(reasoning.from_signature(str(block.get("thinking") or ""), block.get("signature")))
        elif kind == "redacted_thinking":
            parts.append(c.Thinking("", redacted=str(block.get("data") or "")))
        elif kind in _SERVER_TOOL_BLOCK or str(kind).endswith("_tool_result"):
            continue
        else:
            raise InvalidRequest(f"{at}: content blocks of type {kind!r} can only go to an Anthropic upstream.",
                                 param=at)
    return parts


def _tool_choice(choice: Any, req: c.Request) -> None:
    if isinstance(choice, str):  # liberal: the bare form of the type
        choice = {"type": choice}
    if not isinstance(choice, dict):
        return
    kind = choice.get("type")
    if kind == "tool" and isinstance(choice.get("name"), str):
        req.tool_choice = c.NamedTool(choice["name"])
    elif kind in ("auto", "any", "none"):
        req.tool_choice = {"auto": "auto", "any": "required", "none": "none"}[kind]  # type: ignore[assignment]
    if choice.get("disable_parallel_tool_use"):
        req.parallel_tool_calls = False


def _thinking(body: dict[str, Any], req: c.Request) -> None:
    thinking = f.field(body, "thinking", dict) or {}
    config = f.field(body, "output_config", dict) or {}
    req.effort = f.typed(config.get("effort"), str, "output_config.effort")
    kind = thinking.get("type")
    if kind in ("enabled", "adaptive", "disabled"):
        req.thinking = kind
    if kind == "enabled" and req.effort is None:
        budget = f.typed(thinking.get("budget_tokens"), int, "thinking.budget_tokens") or 0
        req.effort = c.effort_from_budget(budget)
    if kind in ("enabled", "adaptive") and thinking.get("display") != "omitted":
        req.reasoning_summary = "auto"
    fmt = f.typed(config.get("format"), dict, "output_config.format")
    if fmt and fmt.get("type") == "json_schema":
        req.response_format = {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt.get("schema") or {}}}


def messages_request_to_canonical(body: dict[str, Any]) -> c.Request:
    req = c.Request(model=str(body.get("model")), messages=[])
    system = body.get("system")
    if system:
        req.system = [p for p in _contents(system, "system") if isinstance(p, c.Text)]
    for i, m in enumerate(f.objects(body.get("messages"), "messages")):
        where = f"messages.{i}"
        role = m.get("role")
        if role not in ("user", "assistant", "system"):
            raise InvalidRequest(f"{where}.role: expected 'user', 'assistant' or 'system'.", param=f"{where}.role")
        c.append_turn(req.messages, role, _parts(m.get("content"), where))
    for i, t in enumerate(f.objects(body.get("tools"), "tools")):
        if (name := builtin_name(t, "messages")) is not None:
            req.builtin_tools.append(c.BuiltinTool(name, t))
        elif not isinstance(t.get("name"), str):
            raise InvalidRequest(f"tools.{i}.name: Field required.", param=f"tools.{i}.name")
        else:
            req.tools.append(c.Tool(t["name"], t.get("description"), t.get("input_schema") or {},
                                    strict=t.get("strict"), cache_control=t.get("cache_control")))
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

    def write(self, raw: dict[str, Any], events: list[c.Event]) -> list[bytes]:
        return [frame for event in events for frame in self.event(event)]

    def event(self, event: c.Event) -> list[bytes]:
        if isinstance(event, c.TextDelta) and event.text:
            frames = [] if self._open == "text" else self._open_block("text", {"type": "text", "text": ""})
            return [*frames, self._delta({"type": "text_delta", "text": event.text})]
        if isinstance(event, c.ThinkingDelta) and event.text:
            frames = [] if self._open == "thinking" else self._open_block(
                "thinking", {"type": "thinking", "thinking": "", "signature": ""})
            return [*frames, self._delta({"type": "thinking_delta", "thinking": event.text})]
        if isinstance(event, c.ThinkingSealed):
            sealed = c.Thinking("", event.signature, event.redacted, event.item_id, event.encrypted)
            if sealed.redacted:
                return [*self._open_block("redacted", {"type": "redacted_thinking", "data": sealed.redacted}),
                        *self._close_block()]
            frames = [] if self._open == "thinking" else self._open_block(
                "thinking", {"type": "thinking", "thinking": "", "signature": ""})
            return [*frames, self._delta({"type": "signature_delta", "signature": reasoning.signature(sealed)}),
                    *self._close_block()]
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
