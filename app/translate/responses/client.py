"""OpenAI Responses (inbound) ↔ canonical. No upstream speaks it: it is always translated."""

from __future__ import annotations

import secrets
import time
from typing import Any

from app.errors import GatewayError, InvalidRequest
from app.json import encode
from app.translate import canonical as c
from app.translate.images import image_from_data_url
from domain.pricing import TokenUsage


def _text_parts(content: Any, where: str) -> list[c.Part]:
    if isinstance(content, str):
        return [c.Text(content)]
    if not isinstance(content, list):
        raise InvalidRequest(f"Invalid content in {where}: expected a string or an array of parts.", param=where)
    parts: list[c.Part] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append(c.Text(str(part.get("text", ""))))
        elif kind == "refusal":
            parts.append(c.Text(str(part.get("refusal", ""))))
        elif kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str):
                raise InvalidRequest(f"Only image_url images are supported, in {where}.", param=where)
            parts.append(image_from_data_url(url))
        else:
            raise InvalidRequest(f"Content parts of type {kind!r} are not supported for this model.", param=where)
    return parts


def responses_request_to_canonical(body: dict[str, Any]) -> c.Request:
    if body.get("previous_response_id"):
        raise InvalidRequest("'previous_response_id' is not supported: this gateway does not store responses; "
                             "send the whole conversation in 'input'.", param="previous_response_id")
    system = [c.Text(str(body["instructions"]))] if body.get("instructions") else []
    messages: list[c.Message] = []

    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for i, item in enumerate(items or []):
        where = f"input[{i}]"
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "message":
            role = item.get("role")
            if role in ("system", "developer"):
                system.extend(p for p in _text_parts(item.get("content"), where) if isinstance(p, c.Text))
            elif role in ("user", "assistant"):
                c.append_turn(messages, role, _text_parts(item.get("content"), where))
            else:
                raise InvalidRequest(f"Invalid role {role!r} in {where}.", param=f"{where}.role")
        elif kind == "function_call":
            c.append_turn(messages, "assistant", [c.ToolCall(str(item.get("call_id")), str(item.get("name")), str(item.get("arguments") or "{}"))])
        elif kind == "function_call_output":
            output = item.get("output")
            content = [c.Text(output)] if isinstance(output, str) else [
                p for p in _text_parts(output, where) if isinstance(p, c.Text | c.Image)]
            c.append_turn(messages, "user", [c.ToolResult(str(item.get("call_id")), content)])  # type: ignore[arg-type]
        elif kind == "reasoning":
            continue  # summaries of earlier reasoning: nothing an upstream can take back
        else:
            raise InvalidRequest(f"Input items of type {kind!r} are not supported.", param=where)

    tools = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict) or t.get("type") != "function":
            raise InvalidRequest(f"Tools of type {t.get('type') if isinstance(t, dict) else t!r} are not supported: "
                                 "only function tools.", param="tools")
        tools.append(c.Tool(str(t.get("name")), t.get("description"), t.get("parameters") or {}))
    choice = body.get("tool_choice")
    tool_choice: c.ToolChoice | None = choice if choice in ("auto", "none", "required") else (
        c.NamedTool(str(choice.get("name"))) if isinstance(choice, dict) and choice.get("type") == "function" else None)
    fmt = ((body.get("text") or {}).get("format") or {}) if isinstance(body.get("text"), dict) else {}
    response_format = None
    if fmt.get("type") == "json_schema":
        response_format = {"type": "json_schema", "json_schema": {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}}
    elif fmt.get("type") == "json_object":
        response_format = {"type": "json_object"}
    return c.Request(
        model=str(body.get("model")),
        system=system,
        messages=messages,
        max_output_tokens=body.get("max_output_tokens"),
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=body.get("parallel_tool_calls"),
        effort=(body.get("reasoning") or {}).get("effort") if isinstance(body.get("reasoning"), dict) else None,
        response_format=response_format,
        user=body.get("user"),
        stream=bool(body.get("stream")),
    )


def usage_dict(usage: TokenUsage, reasoning_tokens: int) -> dict[str, Any]:
    """The official Responses usage, plus the Chat-style names the interface spec also asks for."""
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_hit_tokens, "cache_write_tokens": usage.cache_write_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": usage.total_tokens,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.output_tokens,
    }


class ResponseShell:
    """The parts of a Response object that echo the request."""

    def __init__(self, body: dict[str, Any], model_id: str) -> None:
        self.id = "resp_" + secrets.token_hex(12)
        self.created_at = int(time.time())
        self.model_id = model_id
        self._echo = {
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": None,
            "reasoning": {"effort": (body.get("reasoning") or {}).get("effort"), "summary": None},
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

    def response(self, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None,
                 finish: str | None = None, error: dict[str, Any] | None = None) -> dict[str, Any]:
        incomplete = None
        if finish == "length":
            status, incomplete = "incomplete", {"reason": "max_output_tokens"}
        elif finish == "content_filter":
            status, incomplete = "incomplete", {"reason": "content_filter"}
        out = {"id": self.id, "object": "response", "created_at": self.created_at, "status": status,
               "error": error, "incomplete_details": incomplete, "model": self.model_id, "output": output,
               "usage": usage, **self._echo}
        if status in ("completed", "incomplete"):
            out["completed_at"] = int(time.time())
        return out


def _message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" or text else []}


def _call_item(item_id: str, call: c.ToolCall, status: str) -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call.id, "name": call.name,
            "arguments": call.arguments, "status": status}


def canonical_to_response(resp: c.Response, shell: ResponseShell, extra_usage: dict[str, Any]) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    text = resp.text
    if text:
        output.append(_message_item("msg_" + secrets.token_hex(12), text, "completed"))
    for part in resp.parts:
        if isinstance(part, c.ToolCall):
            output.append(_call_item("fc_" + secrets.token_hex(12), part, "completed"))
    usage = {**usage_dict(resp.usage, resp.reasoning_tokens), **extra_usage} if resp.usage else None
    return shell.response("completed", output, usage, resp.finish)


class ResponsesStreamWriter:
    """Canonical stream events → Responses SSE events with increasing ``sequence_number``."""

    def __init__(self, shell: ResponseShell) -> None:
        self._shell = shell
        self._seq = 0
        self._output: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None  # the item being streamed
        self._text = ""
        self._call: c.ToolCall | None = None
        self._finish: str | None = None

    def _sse(self, kind: str, payload: dict[str, Any]) -> bytes:
        event = {"type": kind, "sequence_number": self._seq, **payload}
        self._seq += 1
        return b"event: " + kind.encode() + b"\ndata: " + encode(event) + b"\n\n"

    def start(self) -> list[bytes]:
        shell = self._shell.response("in_progress", [], None)
        return [self._sse("response.created", {"response": shell}), self._sse("response.in_progress", {"response": shell})]

    def _index(self) -> int:
        return len(self._output)

    def _close(self) -> list[bytes]:
        item = self._open
        if item is None:
            return []
        self._open = None
        index = self._index()
        if item["type"] == "message":
            done = _message_item(item["id"], self._text, "completed")
            part = done["content"][0]
            frames = [
                self._sse("response.output_text.done", {"item_id": item["id"], "output_index": index, "content_index": 0,
                                                        "text": self._text, "logprobs": []}),
                self._sse("response.content_part.done", {"item_id": item["id"], "output_index": index,
                                                         "content_index": 0, "part": part}),
            ]
        else:
            assert self._call is not None
            done = _call_item(item["id"], self._call, "completed")
            frames = [self._sse("response.function_call_arguments.done", {
                "item_id": item["id"], "output_index": index, "name": self._call.name, "arguments": self._call.arguments})]
        frames.append(self._sse("response.output_item.done", {"output_index": index, "item": done}))
        self._output.append(done)
        return frames

    def event(self, event: c.Event) -> list[bytes]:
        if isinstance(event, c.TextDelta) and event.text:
            frames: list[bytes] = []
            if self._open is None or self._open["type"] != "message":
                frames = self._close()
                self._open = _message_item("msg_" + secrets.token_hex(12), "", "in_progress")
                self._text = ""
                index = self._index()
                frames.append(self._sse("response.output_item.added", {"output_index": index, "item": self._open}))
                frames.append(self._sse("response.content_part.added", {
                    "item_id": self._open["id"], "output_index": index, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}}))
            self._text += event.text
            frames.append(self._sse("response.output_text.delta", {
                "item_id": self._open["id"], "output_index": self._index(), "content_index": 0,
                "delta": event.text, "logprobs": []}))
            return frames
        if isinstance(event, c.ToolCallStarted):
            frames = self._close()
            self._call = c.ToolCall(event.id, event.name, "")
            self._open = _call_item("fc_" + secrets.token_hex(12), self._call, "in_progress")
            frames.append(self._sse("response.output_item.added", {"output_index": self._index(), "item": self._open}))
            return frames
        if isinstance(event, c.ToolArgumentsDelta) and self._call is not None and self._open is not None \
                and self._open["type"] == "function_call":
            self._call.arguments += event.fragment
            return [self._sse("response.function_call_arguments.delta", {
                "item_id": self._open["id"], "output_index": self._index(), "delta": event.fragment})]
        if isinstance(event, c.Finished):
            self._finish = event.reason
            return self._close()
        return []

    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]:
        frames = self._close()
        response = self._shell.response("completed", self._output, {**usage_dict(usage, reasoning_tokens), **extra_usage},
                                        self._finish)
        kind = "response.completed" if response["status"] == "completed" else "response.incomplete"
        frames.append(self._sse(kind, {"response": response}))
        return frames

    def error(self, exc: GatewayError) -> list[bytes]:
        failed = self._shell.response("failed", self._output, None, error={"code": exc.type, "message": exc.message})
        return [self._sse("response.failed", {"response": failed})]
