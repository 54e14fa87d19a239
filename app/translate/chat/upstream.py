"""OpenAI Chat Completions ↔ canonical, in both directions."""

from __future__ import annotations

import secrets
import time
from typing import Any

from app.errors import GatewayError, InvalidRequest
from app.json import encode
from app.translate import canonical as c
from app.translate.images import image_from_data_url, image_to_url

_FINISH_IN = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "function_call": "tool_calls",
              "content_filter": "content_filter"}


def usage_from_openai(usage: Any) -> c.TokenUsage | None:
    """Token usage as an OpenAI-compatible provider reports it, by billing kind (None if absent)."""
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int) or prompt < 0 or completion < 0:
        return None
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else 0
    written = details.get("cache_write_tokens") if isinstance(details, dict) else 0
    cached = cached if isinstance(cached, int) and cached > 0 else 0
    written = written if isinstance(written, int) and written > 0 else 0
    cached = min(cached, prompt)
    written = min(written, prompt - cached)
    return c.TokenUsage(
        input_tokens=prompt - cached - written,
        output_tokens=completion,
        cache_write_tokens=written,
        cache_hit_tokens=cached,
    )



# -- inbound: a client's chat request, and what we answer it ------------------------------------


def _text_of(content: Any, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "refusal"))
    raise InvalidRequest(f"Invalid content in {where}: expected a string or an array of parts.", param=where)


def _user_parts(content: Any, where: str) -> list[c.Part]:
    if content is None or isinstance(content, str):
        return [c.Text(content or "")]
    if not isinstance(content, list):
        raise InvalidRequest(f"Invalid content in {where}: expected a string or an array of parts.", param=where)
    parts: list[c.Part] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append(c.Text(str(part.get("text", ""))))
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str):
                raise InvalidRequest(f"Invalid image_url in {where}.", param=where)
            parts.append(image_from_data_url(url))
        else:
            raise InvalidRequest(f"Content parts of type {kind!r} are not supported for this model.", param=where)
    return parts


def chat_request_to_canonical(body: dict[str, Any]) -> c.Request:
    system: list[c.Text] = []
    messages: list[c.Message] = []

    for i, m in enumerate(body.get("messages") or []):
        where = f"messages[{i}]"
        role = m.get("role")
        if role in ("system", "developer"):
            system.append(c.Text(_text_of(m.get("content"), where)))
        elif role == "user":
            c.append_turn(messages, "user", _user_parts(m.get("content"), where))
        elif role == "assistant":
            parts: list[c.Part] = []
            text = _text_of(m.get("content"), where)
            if text:
                parts.append(c.Text(text))
            for call in m.get("tool_calls") or []:
                fn = call.get("function") or {}
                parts.append(c.ToolCall(str(call.get("id", "")), str(fn.get("name", "")), str(fn.get("arguments") or "{}")))
            c.append_turn(messages, "assistant", parts or [c.Text("")])
        elif role in ("tool", "function"):
            call_id = m.get("tool_call_id") or m.get("name")
            if not call_id:
                raise InvalidRequest(f"Missing 'tool_call_id' in {where}.", param=f"{where}.tool_call_id")
            c.append_turn(messages, "user", [c.ToolResult(str(call_id), [c.Text(_text_of(m.get("content"), where))])])
        else:
            raise InvalidRequest(f"Invalid role {role!r} in {where}.", param=f"{where}.role")

    if (body.get("n") or 1) != 1:
        raise InvalidRequest("'n' greater than 1 is only supported by OpenAI-compatible upstreams.", param="n")
    stop = body.get("stop")
    tool_choice = body.get("tool_choice")
    return c.Request(
        model=str(body.get("model")),
        system=system,
        messages=messages,
        max_output_tokens=body.get("max_completion_tokens") or body.get("max_tokens"),
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        stop=[stop] if isinstance(stop, str) else list(stop or []),
        tools=[
            c.Tool(t["function"]["name"], t["function"].get("description"), t["function"].get("parameters") or {})
            for t in body.get("tools") or []
            if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict)
        ],
        tool_choice=_tool_choice_in(tool_choice),
        parallel_tool_calls=body.get("parallel_tool_calls"),
        effort=body.get("reasoning_effort"),
        response_format=body.get("response_format"),
        user=body.get("user"),
        stream=bool(body.get("stream")),
    )


def _tool_choice_in(choice: Any) -> c.ToolChoice | None:
    if choice in ("auto", "none", "required"):
        return choice  # type: ignore[return-value]
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return c.NamedTool(str(choice["function"].get("name")))
    return None


def _tool_choice_out(choice: c.ToolChoice | None) -> Any:
    if isinstance(choice, c.NamedTool):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def usage_dict(usage: c.TokenUsage, reasoning_tokens: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_hit_tokens, "cache_write_tokens": usage.cache_write_tokens},
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
    }


def canonical_to_chat_response(resp: c.Response, model_id: str, extra_usage: dict[str, Any]) -> dict[str, Any]:
    calls = [p for p in resp.parts if isinstance(p, c.ToolCall)]
    message: dict[str, Any] = {"role": "assistant", "content": resp.text or (None if calls else ""), "refusal": None}
    if calls:
        message["tool_calls"] = [
            {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}} for t in calls
        ]
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
        self._base = {"id": "chatcmpl-" + secrets.token_hex(12), "object": "chat.completion.chunk",
                      "created": int(time.time()), "model": model_id}
        self._include_usage = include_usage
        self._tool_index = -1
        self._started = False

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {**self._base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if self._include_usage:
            chunk["usage"] = None
        return b"data: " + encode(chunk) + b"\n\n"

    def start(self) -> list[bytes]:
        self._started = True
        return [self._chunk({"role": "assistant", "content": ""})]

    def event(self, event: c.Event) -> list[bytes]:
        if isinstance(event, c.TextDelta) and event.text:
            return [self._chunk({"content": event.text})]
        if isinstance(event, c.ToolCallStarted):
            self._tool_index += 1
            call = {"index": self._tool_index, "id": event.id, "type": "function",
                    "function": {"name": event.name, "arguments": ""}}
            return [self._chunk({"tool_calls": [call]})]
        if isinstance(event, c.ToolArgumentsDelta) and event.fragment:
            call = {"index": max(self._tool_index, 0), "function": {"arguments": event.fragment}}
            return [self._chunk({"tool_calls": [call]})]
        if isinstance(event, c.Finished):
            return [self._chunk({}, event.reason)]
        return []

    def finish(self, usage: c.TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]:
        frames = []
        if self._include_usage:
            final = {**self._base, "choices": [], "usage": {**usage_dict(usage, reasoning_tokens), **extra_usage}}
            frames.append(b"data: " + encode(final) + b"\n\n")
        frames.append(b"data: [DONE]\n\n")
        return frames

    def error(self, exc: GatewayError) -> list[bytes]:
        return [b"data: " + encode(exc.openai_body()) + b"\n\n"]


# -- outbound: an OpenAI-compatible upstream ----------------------------------------------------


def canonical_to_chat_body(req: c.Request, upstream_model: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if req.system:
        messages.append({"role": "system", "content": "\n".join(t.text for t in req.system)})
    for m in req.messages:
        if m.role == "assistant":
            text = "".join(p.text for p in m.parts if isinstance(p, c.Text))
            calls = [p for p in m.parts if isinstance(p, c.ToolCall)]
            out: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                out["tool_calls"] = [
                    {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}}
                    for t in calls
                ]
            messages.append(out)
            continue
        for result in (p for p in m.parts if isinstance(p, c.ToolResult)):
            messages.append({"role": "tool", "tool_call_id": result.call_id,
                             "content": "".join(x.text for x in result.content if isinstance(x, c.Text))})
        content = [p for p in m.parts if isinstance(p, c.Text | c.Image)]
        if content:
            if all(isinstance(p, c.Text) for p in content):
                messages.append({"role": "user", "content": "".join(p.text for p in content)})  # type: ignore[union-attr]
            else:
                messages.append({"role": "user", "content": [
                    {"type": "text", "text": p.text} if isinstance(p, c.Text)
                    else {"type": "image_url", "image_url": {"url": image_to_url(p)}}
                    for p in content
                ]})
    body: dict[str, Any] = {"model": upstream_model, "messages": messages}
    optional = {
        "max_completion_tokens": req.max_output_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "stop": req.stop or None,
        "tool_choice": _tool_choice_out(req.tool_choice),
        "parallel_tool_calls": req.parallel_tool_calls if req.tools else None,
        "reasoning_effort": req.effort,
        "response_format": req.response_format,
        "user": req.user,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    if req.tools:
        body["tools"] = [
            {"type": "function", "function": {"name": t.name, **({"description": t.description} if t.description else {}),
                                              "parameters": t.parameters or {"type": "object", "properties": {}}}}
            for t in req.tools
        ]
    if req.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def chat_response_to_canonical(answer: dict[str, Any], usage: c.TokenUsage | None) -> c.Response:
    choice = (answer.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    parts: list[c.Text | c.ToolCall | c.Thinking] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append(c.Thinking(reasoning))
    if message.get("content"):
        parts.append(c.Text(str(message["content"])))
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        parts.append(c.ToolCall(str(call.get("id")), str(fn.get("name")), str(fn.get("arguments") or "")))
    details = (answer.get("usage") or {}).get("completion_tokens_details") or {}
    return c.Response(
        id=str(answer.get("id") or ""),
        model=str(answer.get("model") or ""),
        parts=parts,
        finish=_FINISH_IN.get(choice.get("finish_reason"), "stop"),  # type: ignore[arg-type]
        usage=usage,
        reasoning_tokens=int(details.get("reasoning_tokens") or 0) if isinstance(details, dict) else 0,
    )


class ChatChunkReader:
    """Upstream ``chat.completion.chunk`` dicts → canonical events."""

    def __init__(self) -> None:
        self._calls: dict[int, str] = {}

    def events(self, chunk: dict[str, Any]) -> list[c.Event]:
        out: list[c.Event] = []
        usage = usage_from_openai(chunk.get("usage"))
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                out.append(c.ThinkingDelta(reasoning))
            if delta.get("content"):
                out.append(c.TextDelta(str(delta["content"])))
            for call in delta.get("tool_calls") or []:
                index = call.get("index", 0)
                fn = call.get("function") or {}
                if index not in self._calls:
                    self._calls[index] = str(call.get("id") or f"call_{index}")
                    out.append(c.ToolCallStarted(self._calls[index], str(fn.get("name") or "")))
                if fn.get("arguments"):
                    out.append(c.ToolArgumentsDelta(str(fn["arguments"])))
            if choice.get("finish_reason"):
                out.append(c.Finished(_FINISH_IN.get(choice["finish_reason"], "stop")))  # type: ignore[arg-type]
        if usage is not None:
            details = (chunk.get("usage") or {}).get("completion_tokens_details") or {}
            out.append(c.UsageReported(usage, int(details.get("reasoning_tokens") or 0) if isinstance(details, dict) else 0))
        return out
