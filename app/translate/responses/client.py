"""A Responses client's side: its request → canonical, and canonical answers → Response objects.

Used only when the model's upstream speaks another protocol (a Responses request to a Responses
upstream passes through untouched). The stream writer is in ``responses/stream.py``.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from app.errors import InvalidRequest
from app.json import object_or
from app.translate import canonical as c
from app.translate import fields as f
from app.translate import reasoning
from app.translate.images import file_from_data_url, image_from_data_url
from domain.usage import TokenUsage

_STATE = (
    "Tollgate stores no responses, so '{}' works only with models whose upstream speaks the Responses API; "
    "send the whole conversation in 'input'."
)


def _content(content: Any, where: str) -> list[c.Text | c.Image | c.File]:
    if isinstance(content, str):
        return [c.Text(content)]
    parts: list[c.Text | c.Image | c.File] = []
    for j, part in enumerate(f.objects(content, where)):
        at = f"{where}[{j}]"
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append(c.Text(f.text(part.get("text"), f"{at}.text")))
        elif kind == "refusal":
            parts.append(c.Text(f.text(part.get("refusal"), f"{at}.refusal")))
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append(image_from_data_url(part["image_url"]))
        elif kind == "input_file" and isinstance(part.get("file_data") or part.get("file_url"), str):
            parts.append(
                file_from_data_url(
                    part.get("file_data") or part["file_url"], f.typed(part.get("filename"), str, f"{at}.filename")
                )
            )
        elif kind in ("input_image", "input_file"):
            raise InvalidRequest(f"Files by 'file_id' ({at}) can only go to an OpenAI upstream.", param=at)
        else:
            raise InvalidRequest(f"Content parts of type {kind!r} cannot be sent to this model's upstream.", param=at)
    return parts


def _item(item: dict[str, Any], where: str, req: c.Request) -> None:
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        parts = _content(item.get("content"), f"{where}.content")
        if role in ("system", "developer"):
            texts = [p for p in parts if isinstance(p, c.Text)]
            if req.messages:
                c.append_turn(req.messages, "system", list(texts))
            else:
                req.system.extend(texts)
        elif role in ("user", "assistant"):
            c.append_turn(req.messages, role, list(parts))
        else:
            raise InvalidRequest(f"Invalid role {role!r} in {where}.", param=f"{where}.role")
    elif kind in ("function_call", "custom_tool_call"):
        custom = kind == "custom_tool_call"
        field = "input" if custom else "arguments"
        arguments = f.typed(item.get(field), str, f"{where}.{field}")
        c.append_turn(
            req.messages,
            "assistant",
            [
                c.ToolCall(
                    f.present(item.get("call_id"), str, f"{where}.call_id"),
                    f.present(item.get("name"), str, f"{where}.name"),
                    arguments or ("" if custom else "{}"),
                    f.typed(item.get("namespace"), str, f"{where}.namespace"),
                    custom,
                )
            ],
        )
    elif kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        content = _content(output if output is not None else "", f"{where}.output")
        c.append_turn(
            req.messages,
            "user",
            [
                c.ToolResult(
                    f.present(item.get("call_id"), str, f"{where}.call_id"),
                    content,
                    custom=kind == "custom_tool_call_output",
                )
            ],
        )
    elif kind == "reasoning":
        summary = "\n\n".join(
            f.text(s.get("text"), f"{where}.summary[{j}].text")
            for j, s in enumerate(f.objects(item.get("summary"), f"{where}.summary"))
        )
        c.append_turn(
            req.messages,
            "assistant",
            [
                reasoning.from_encrypted_content(
                    f.typed(item.get("id"), str, f"{where}.id"),
                    f.typed(item.get("encrypted_content"), str, f"{where}.encrypted_content"),
                    summary,
                )
            ],
        )
    elif kind == "item_reference":
        raise InvalidRequest(_STATE.format("item_reference"), param=where)
    elif not str(kind).endswith(("_call", "_call_output")):  # those record what built-in tools did
        raise InvalidRequest(f"Input items of type {kind!r} cannot be sent to this model's upstream.", param=where)


def _tool(t: dict[str, Any], where: str, namespace: str | None, req: c.Request) -> None:
    kind = t.get("type", "function")
    if kind == "namespace" and namespace is None:
        name = f.present(t.get("name"), str, f"{where}.name")
        for j, inner in enumerate(f.objects(t.get("tools"), f"{where}.tools")):
            _tool(inner, f"{where}.tools[{j}]", name, req)
        return
    if kind not in ("function", "custom"):
        req.builtin_tools.append(c.BuiltinTool(str(kind), t))
        return
    if not isinstance(t.get("name"), str):
        raise InvalidRequest(f"Missing required parameter: '{where}.name'.", param=f"{where}.name")
    req.tools.append(f.function_tool(t, where, namespace, custom=kind == "custom"))


def _tool_choice(choice: Any) -> c.ToolChoice | None:
    if choice is None or isinstance(choice, str):
        return c.one_of(choice, c.TOOL_MODES)
    f.present(choice, dict, "tool_choice")
    if choice.get("type") in ("function", "custom"):
        return c.NamedTool(
            f.present(choice.get("name"), str, "tool_choice.name"),
            f.typed(choice.get("namespace"), str, "tool_choice.namespace"),
        )
    if choice.get("type") == "allowed_tools":
        return c.one_of(choice.get("mode"), c.ALLOWED_TOOLS_MODES)
    return None


def responses_request_to_canonical(body: dict[str, Any]) -> c.Request:
    for stateful in ("previous_response_id", "conversation"):
        if body.get(stateful):
            raise InvalidRequest(_STATE.format(stateful), param=stateful)
    req = c.Request(model=str(body.get("model")), messages=[])
    instructions = f.field(body, "instructions", str)
    if instructions:
        req.system.append(c.Text(instructions))
    items = body.get("input")
    for i, item in enumerate(
        [{"role": "user", "content": items}] if isinstance(items, str) else f.objects(items, "input")
    ):
        _item(item, f"input[{i}]", req)
    for i, t in enumerate(f.objects(body.get("tools"), "tools")):
        _tool(t, f"tools[{i}]", None, req)
    req.tool_choice = _tool_choice(body.get("tool_choice"))
    thinking = f.field(body, "reasoning", dict) or {}
    req.effort = f.typed(thinking.get("effort"), str, "reasoning.effort")
    req.reasoning_summary = f.typed(thinking.get("summary"), str, "reasoning.summary")
    text = f.field(body, "text", dict) or {}
    fmt = f.typed(text.get("format"), dict, "text.format") or {}
    if fmt.get("type") == "json_schema":
        req.response_format = {
            "type": "json_schema",
            "json_schema": {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt},
        }
    elif fmt.get("type") == "json_object":
        req.response_format = {"type": "json_object"}
    req.verbosity = f.typed(text.get("verbosity"), str, "text.verbosity")
    req.max_output_tokens = f.field(body, "max_output_tokens", int)
    f.openai_parameters(body, req)
    return req


def wants_encrypted_reasoning(body: dict[str, Any]) -> bool:
    include = body.get("include")
    return isinstance(include, list) and "reasoning.encrypted_content" in include


# -- answers -------------------------------------------------------------------------------------


def usage_dict(usage: TokenUsage, reasoning_tokens: int) -> dict[str, Any]:
    """The official Responses usage, plus the Chat-style names the gateway also reports (docs/api.md)."""
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cache_hit_tokens,
            "cache_write_tokens": usage.all_cache_writes,
        },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": usage.total_tokens,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.output_tokens,
    }


class ResponseShell:
    """The parts of a Response object that echo the request, and how its items are written."""

    def __init__(self, body: dict[str, Any], model_id: str) -> None:
        self.id = "resp_" + secrets.token_hex(12)
        self.created_at = int(time.time())
        self.model_id = model_id
        self.encrypted_reasoning = wants_encrypted_reasoning(body)
        effort = object_or(body.get("reasoning"), {})
        self._echo = {
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": None,
            "reasoning": {"effort": effort.get("effort"), "summary": effort.get("summary")},
            "store": False,
            "temperature": body.get("temperature", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "top_p": body.get("top_p", 1.0),
            "truncation": "disabled",
            "user": body.get("user"),
            "metadata": body.get("metadata") or {},
        }

    def response(
        self,
        status: str,
        output: list[dict[str, Any]],
        usage: dict[str, Any] | None,
        finish: str | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        incomplete = None
        if finish == "length":
            status, incomplete = "incomplete", {"reason": "max_output_tokens"}
        elif finish == "content_filter":
            status, incomplete = "incomplete", {"reason": "content_filter"}
        out = {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": error,
            "incomplete_details": incomplete,
            "model": self.model_id,
            "output": output,
            "usage": usage,
            **self._echo,
        }
        if status in ("completed", "incomplete"):
            out["completed_at"] = int(time.time())
        return out

    def reasoning_item(self, item_id: str, thinking: c.Thinking, status: str) -> dict[str, Any]:
        return {
            "type": "reasoning",
            "id": item_id,
            "status": status,
            "summary": [{"type": "summary_text", "text": thinking.text}] if thinking.text else [],
            "encrypted_content": reasoning.encrypted_content(thinking) if self.encrypted_reasoning else None,
        }


def message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" or text else [],
    }


def call_item(item_id: str, call: c.ToolCall, status: str) -> dict[str, Any]:
    if call.custom:
        item = {
            "type": "custom_tool_call",
            "id": item_id,
            "call_id": call.id,
            "name": call.name,
            "input": call.arguments,
            "status": status,
        }
    else:
        item = {
            "type": "function_call",
            "id": item_id,
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
            "status": status,
        }
    if call.namespace:
        item["namespace"] = call.namespace
    return item


def canonical_to_response(resp: c.Response, shell: ResponseShell, extra_usage: dict[str, Any]) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    for part in resp.parts:
        if isinstance(part, c.Thinking):
            output.append(shell.reasoning_item("rs_" + secrets.token_hex(12), part, "completed"))
    if resp.text:
        output.append(message_item("msg_" + secrets.token_hex(12), resp.text, "completed"))
    for part in resp.parts:
        if isinstance(part, c.ToolCall):
            output.append(call_item(("ctc_" if part.custom else "fc_") + secrets.token_hex(12), part, "completed"))
    usage = {**usage_dict(resp.usage, resp.reasoning_tokens), **extra_usage} if resp.usage else None
    return shell.response("completed", output, usage, resp.finish)
