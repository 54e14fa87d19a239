"""A Chat Completions client's side: its request → canonical, and canonical answers → its wire.

Used only when the model's upstream speaks another protocol (a chat request to a chat upstream
passes through untouched).
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from app.errors import GatewayError, InvalidRequest
from app.json import encode
from app.translate import canonical as c
from app.translate import fields as f
from app.translate.images import file_from_data_url, image_from_data_url
from app.translate.tools import builtin_name
from domain.usage import TokenUsage

_AUDIO = (
    "Audio ('audio', 'modalities', input_audio parts) is only served by models whose upstream speaks "
    "OpenAI Chat Completions."
)


def _texts(content: Any, where: str) -> list[c.Text]:
    """System, developer and tool content: a string or text parts."""
    if content is None or isinstance(content, str):
        return [c.Text(content or "")]
    return [
        c.Text(f.text(p.get(kind), f"{where}.content[{j}].{kind}"))
        for j, p in enumerate(f.objects(content, f"{where}.content"))
        if (kind := p.get("type")) in ("text", "refusal")
    ]


def _user_parts(content: Any, where: str) -> list[c.Part]:
    if content is None or isinstance(content, str):
        return [c.Text(content or "")]
    parts: list[c.Part] = []
    for j, part in enumerate(f.objects(content, f"{where}.content")):
        at = f"{where}.content[{j}]"
        kind = part.get("type")
        if kind == "text":
            parts.append(
                c.Text(
                    f.text(part.get("text"), f"{at}.text"),
                    f.typed(part.get("cache_control"), dict, f"{at}.cache_control"),
                )
            )
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                raise InvalidRequest(f"Invalid image_url in {at}.", param=at)
            parts.append(image_from_data_url(url))
        elif kind == "file":
            document = f.typed(part.get("file"), dict, f"{at}.file") or {}
            if not isinstance(document.get("file_data"), str):
                raise InvalidRequest(
                    f"Files by 'file_id' ({at}) can only go to an OpenAI upstream; send 'file_data' instead.", param=at
                )
            parts.append(
                file_from_data_url(document["file_data"], f.typed(document.get("filename"), str, f"{at}.file.filename"))
            )
        elif kind == "input_audio":
            raise InvalidRequest(_AUDIO, param=at)
        else:
            raise InvalidRequest(f"Content parts of type {kind!r} cannot be sent to this model's upstream.", param=at)
    return parts


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value if value is not None else {})


def _calls(m: dict[str, Any], where: str) -> list[c.Part]:
    parts: list[c.Part] = []
    for j, call in enumerate(f.objects(m.get("tool_calls"), f"{where}.tool_calls")):
        at = f"{where}.tool_calls[{j}]"
        call_id = f.typed(call.get("id"), str, f"{at}.id") or f"call_{j}"
        if call.get("type") == "custom" or isinstance(call.get("custom"), dict):
            custom = f.present(call.get("custom"), dict, f"{at}.custom")
            parts.append(
                c.ToolCall(
                    call_id,
                    f.present(custom.get("name"), str, f"{at}.custom.name"),
                    f.text(custom.get("input"), f"{at}.custom.input"),
                    custom=True,
                )
            )
        else:
            fn = f.present(call.get("function"), dict, f"{at}.function")
            parts.append(
                c.ToolCall(
                    call_id, f.present(fn.get("name"), str, f"{at}.function.name"), _arguments(fn.get("arguments"))
                )
            )
    legacy = f.typed(m.get("function_call"), dict, f"{where}.function_call")
    if legacy is not None:
        name = f.present(legacy.get("name"), str, f"{where}.function_call.name")
        parts.append(c.ToolCall(name, name, _arguments(legacy.get("arguments"))))
    return parts


def _tools(body: dict[str, Any], req: c.Request) -> None:
    for i, t in enumerate(f.objects(body.get("tools"), "tools")):
        where = f"tools[{i}]"
        if (name := builtin_name(t, "chat")) is not None:
            req.builtin_tools.append(c.BuiltinTool(name, t))
            continue
        kind = str(t.get("type", "function"))
        spec = f.typed(t.get(kind), dict, f"{where}.{kind}") or {}
        if not isinstance(spec.get("name"), str):
            raise InvalidRequest(f"Missing required parameter: '{where}.{kind}.name'.", param=f"{where}.{kind}.name")
        req.tools.append(f.function_tool(spec, f"{where}.{kind}", custom=kind == "custom"))
    for i, fn in enumerate(f.objects(body.get("functions"), "functions")):  # the legacy form
        req.tools.append(f.function_tool(fn, f"functions[{i}]"))
    if body.get("web_search_options") is not None:
        req.builtin_tools.append(c.BuiltinTool("web_search", {"type": "web_search"}))


def _tool_choice(choice: Any, where: str) -> c.ToolChoice | None:
    if choice is None or isinstance(choice, str):
        return c.one_of(choice, c.TOOL_MODES)
    f.present(choice, dict, where)
    for kind in ("function", "custom"):
        if isinstance(choice.get(kind), dict) and isinstance(choice[kind].get("name"), str):
            return c.NamedTool(choice[kind]["name"])
    if isinstance(choice.get("name"), str):  # the legacy function_call form
        return c.NamedTool(choice["name"])
    allowed = choice.get("allowed_tools")
    return c.one_of(allowed.get("mode"), c.ALLOWED_TOOLS_MODES) if isinstance(allowed, dict) else None


def chat_request_to_canonical(body: dict[str, Any]) -> c.Request:
    req = c.Request(model=str(body.get("model")), messages=[])
    for i, m in enumerate(f.objects(body.get("messages"), "messages")):
        where = f"messages[{i}]"
        role = m.get("role")
        if role in ("system", "developer"):
            if req.messages:
                c.append_turn(req.messages, "system", list(_texts(m.get("content"), where)))
            else:
                req.system.extend(_texts(m.get("content"), where))
        elif role == "user":
            c.append_turn(req.messages, "user", _user_parts(m.get("content"), where))
        elif role == "assistant":
            if m.get("audio") is not None:
                raise InvalidRequest(_AUDIO, param=f"{where}.audio")
            parts: list[c.Part] = [t for t in _texts(m.get("content"), where) if t.text]
            parts.extend(_calls(m, where))
            c.append_turn(req.messages, "assistant", parts or [c.Text("")])
        elif role in ("tool", "function"):
            call_id = m.get("tool_call_id") or m.get("name")
            if not isinstance(call_id, str):
                raise InvalidRequest(f"Missing 'tool_call_id' in {where}.", param=f"{where}.tool_call_id")
            result: list[c.Text | c.Image | c.File] = list(_texts(m.get("content"), where))
            c.append_turn(req.messages, "user", [c.ToolResult(call_id, result)])
        else:
            raise InvalidRequest(f"Invalid role {role!r} in {where}.", param=f"{where}.role")

    if (f.field(body, "n", int) or 1) != 1:
        raise InvalidRequest("'n' greater than 1 is only supported by OpenAI chat-completions upstreams.", param="n")
    if body.get("audio") is not None or "audio" in (f.strings(body.get("modalities"), "modalities")):
        raise InvalidRequest(_AUDIO, param="audio" if body.get("audio") is not None else "modalities")
    _tools(body, req)
    req.tool_choice = _tool_choice(body.get("tool_choice"), "tool_choice")
    if body.get("tool_choice") is None:
        req.tool_choice = _tool_choice(body.get("function_call"), "function_call")
    req.max_output_tokens = f.field(body, "max_completion_tokens", int) or f.field(body, "max_tokens", int)
    req.stop = f.strings(body.get("stop"), "stop")
    req.effort = f.field(body, "reasoning_effort", str)
    req.response_format = f.field(body, "response_format", dict)
    req.verbosity = f.field(body, "verbosity", str)
    f.openai_parameters(body, req)
    return req


# -- answers -------------------------------------------------------------------------------------


def usage_dict(usage: TokenUsage, reasoning_tokens: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {
            "cached_tokens": usage.cache_hit_tokens,
            "cache_write_tokens": usage.all_cache_writes,
        },
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
    }


def _tool_call(call: c.ToolCall) -> dict[str, Any]:
    if call.custom:
        return {"id": call.id, "type": "custom", "custom": {"name": call.name, "input": call.arguments}}
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def canonical_to_chat_response(resp: c.Response, model_id: str, extra_usage: dict[str, Any]) -> dict[str, Any]:
    calls = [p for p in resp.parts if isinstance(p, c.ToolCall)]
    message: dict[str, Any] = {"role": "assistant", "content": resp.text or (None if calls else ""), "refusal": None}
    reasoning = "".join(p.text for p in resp.parts if isinstance(p, c.Thinking))
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [_tool_call(t) for t in calls]
    return {
        "id": "chatcmpl-" + secrets.token_hex(12),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_id,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": resp.finish}],
        "usage": {**(usage_dict(resp.usage, resp.reasoning_tokens) if resp.usage else {}), **extra_usage},
    }


class ChatStreamWriter:
    """Canonical stream events → ``chat.completion.chunk`` frames (role once, ids and names once)."""

    def __init__(self, model_id: str, include_usage: bool) -> None:
        self._base = {
            "id": "chatcmpl-" + secrets.token_hex(12),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model_id,
        }
        self._include_usage = include_usage
        self._tool_index = -1
        self._custom = False

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {**self._base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if self._include_usage:
            chunk["usage"] = None
        return b"data: " + encode(chunk) + b"\n\n"

    def start(self) -> list[bytes]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def write(self, raw: dict[str, Any], events: list[c.Event]) -> list[bytes]:
        return [frame for event in events for frame in self.event(event)]

    def event(self, event: c.Event) -> list[bytes]:
        if isinstance(event, c.TextDelta) and event.text:
            return [self._chunk({"content": event.text})]
        if isinstance(event, c.ThinkingDelta) and event.text:
            return [self._chunk({"reasoning_content": event.text})]
        if isinstance(event, c.ToolCallStarted):
            self._tool_index += 1
            self._custom = event.custom
            call: dict[str, Any] = {"index": self._tool_index, "id": event.id}
            if event.custom:
                call.update(type="custom", custom={"name": event.name, "input": ""})
            else:
                call.update(type="function", function={"name": event.name, "arguments": ""})
            return [self._chunk({"tool_calls": [call]})]
        if isinstance(event, c.ToolArgumentsDelta) and event.fragment:
            index = max(self._tool_index, 0)
            piece = (
                {"custom": {"input": event.fragment}} if self._custom else {"function": {"arguments": event.fragment}}
            )
            return [self._chunk({"tool_calls": [{"index": index, **piece}]})]
        if isinstance(event, c.Finished):
            return [self._chunk({}, event.reason)]
        return []

    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]:
        frames = []
        if self._include_usage:
            final = {**self._base, "choices": [], "usage": {**usage_dict(usage, reasoning_tokens), **extra_usage}}
            frames.append(b"data: " + encode(final) + b"\n\n")
        frames.append(b"data: [DONE]\n\n")
        return frames

    def error(self, exc: GatewayError) -> list[bytes]:
        return [b"data: " + encode(exc.openai_body()) + b"\n\n"]
