"""A Chat Completions upstream's side: canonical requests → its wire, its answers → canonical.

Also what the pass-through reads of a chat answer (its usage, its chunks' text), since a request
passed through is billed from the same readings.
"""

from __future__ import annotations

from typing import Any

from app.json import object_or
from app.translate import canonical as c
from app.translate.images import file_to_data_url, image_to_url
from app.translate.tools import ToolNames
from domain.usage import TokenUsage

_FINISH_IN: dict[object, c.Finish] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


def usage_from_openai(usage: Any, service_tier: Any = None) -> TokenUsage | None:
    """Token usage as an OpenAI-compatible provider reports it, by billing kind (None if absent),
    with the service tier the answer says it was served at (a top-level member of the answer, and of
    every chunk of a stream)."""
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int) or prompt < 0 or completion < 0:
        return None
    return split_prompt(prompt, completion, usage.get("prompt_tokens_details"), service_tier)


def split_prompt(
    prompt: int, output: int, details: Any, service_tier: Any = None, tool_calls: tuple[tuple[str, int], ...] = ()
) -> TokenUsage:
    """OpenAI's prompt count includes its cached (and cache-written) tokens, so they are taken out
    of it and each kind billed at its own price (counting them as input too is how a gateway bills
    a 0.34 USD request 1.68 USD); its output count includes the reasoning tokens, billed as output."""
    details = details if isinstance(details, dict) else {}
    cached = details.get("cached_tokens")
    written = details.get("cache_write_tokens")
    cached = min(cached, prompt) if isinstance(cached, int) and cached > 0 else 0
    written = min(written, prompt - cached) if isinstance(written, int) and written > 0 else 0
    return TokenUsage(
        input_tokens=prompt - cached - written,
        output_tokens=output,
        cache_write_tokens=written,
        cache_hit_tokens=cached,
        service_tier=service_tier if isinstance(service_tier, str) else "",
        tool_calls=tool_calls,
    )


def reasoning_tokens(usage: Any, details_key: str) -> int:
    details = usage.get(details_key) if isinstance(usage, dict) else None
    value = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return value if isinstance(value, int) and value > 0 else 0


# -- requests ------------------------------------------------------------------------------------


def _user_content(parts: list[c.Part]) -> str | list[dict[str, Any]]:
    if all(isinstance(p, c.Text) for p in parts):
        return "".join(p.text for p in parts if isinstance(p, c.Text))
    content: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, c.Text):
            content.append({"type": "text", "text": p.text})
        elif isinstance(p, c.Image):
            content.append({"type": "image_url", "image_url": {"url": image_to_url(p)}})
        elif isinstance(p, c.File):
            content.append(
                {"type": "file", "file": {"file_data": file_to_data_url(p), "filename": p.filename or "file"}}
                if p.data
                else {"type": "text", "text": f"(document: {p.url})"}
            )
    return content


def _messages(req: c.Request, names: ToolNames) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if req.system:
        messages.append({"role": "system", "content": "\n".join(t.text for t in req.system)})
    for m in req.messages:
        if m.role == "system":
            messages.append({"role": "system", "content": "\n".join(p.text for p in m.parts if isinstance(p, c.Text))})
        elif m.role == "assistant":
            text = "".join(p.text for p in m.parts if isinstance(p, c.Text))
            calls = [p for p in m.parts if isinstance(p, c.ToolCall)]
            out: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                out["tool_calls"] = [
                    {
                        "id": t.id,
                        "type": "function",
                        "function": {
                            "name": names.upstream_name(t.name, t.namespace),
                            "arguments": names.call_arguments(t),
                        },
                    }
                    for t in calls
                ]
            messages.append(out)
        else:
            attachments: list[c.Part] = []  # a tool's images: chat tool messages take text only
            for result in (p for p in m.parts if isinstance(p, c.ToolResult)):
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": result.call_id,
                        "content": "".join(x.text for x in result.content if isinstance(x, c.Text)),
                    }
                )
                attachments.extend(x for x in result.content if not isinstance(x, c.Text))
            content = attachments + [p for p in m.parts if isinstance(p, c.Text | c.Image | c.File)]
            if content:
                messages.append({"role": "user", "content": _user_content(content)})
    return messages


def _tool_choice(choice: c.ToolChoice | None, names: ToolNames) -> Any:
    if isinstance(choice, c.NamedTool):
        return {"type": "function", "function": {"name": names.upstream_name(choice.name, choice.namespace)}}
    return choice


def canonical_to_chat_body(req: c.Request, upstream_model: str, names: ToolNames) -> dict[str, Any]:
    body: dict[str, Any] = {"model": upstream_model, "messages": _messages(req, names)}
    optional = {
        "max_completion_tokens": req.max_output_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "stop": req.stop or None,
        "tool_choice": _tool_choice(req.tool_choice, names) if req.tools else None,
        "parallel_tool_calls": req.parallel_tool_calls if req.tools else None,
        "reasoning_effort": req.effort,
        "response_format": req.response_format,
        "verbosity": req.verbosity,
        "user": req.user,
        "metadata": req.metadata,
        "store": req.store,
        "service_tier": req.service_tier,
        "prompt_cache_key": req.prompt_cache_key,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    tools: list[dict[str, Any]] = []
    for tool in req.tools:
        name, description, parameters = names.definition(tool)
        function: dict[str, Any] = {"name": name, "parameters": parameters}
        if description:
            function["description"] = description
        if tool.strict is not None and not tool.custom:
            function["strict"] = tool.strict
        tools.append({"type": "function", "function": function})
    tools.extend(b.spec for b in req.builtin_tools)  # built-ins the model's policy passes on
    if tools:
        body["tools"] = tools
    if req.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


# -- answers -------------------------------------------------------------------------------------


def chat_response_to_canonical(answer: dict[str, Any]) -> c.Response:
    choices = answer.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = object_or(choice.get("message"), {})
    parts: list[c.Text | c.ToolCall | c.Thinking] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append(c.Thinking(reasoning))
    if message.get("content"):
        parts.append(c.Text(str(message["content"])))
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict) and isinstance(call.get("custom"), dict):
            parts.append(
                c.ToolCall(
                    str(call.get("id")),
                    str(call["custom"].get("name")),
                    str(call["custom"].get("input") or ""),
                    custom=True,
                )
            )
        elif isinstance(call, dict):
            fn = call.get("function") or {}
            parts.append(c.ToolCall(str(call.get("id")), str(fn.get("name")), str(fn.get("arguments") or "")))
    usage = answer.get("usage")
    return c.Response(
        id=str(answer.get("id") or ""),
        model=str(answer.get("model") or ""),
        parts=parts,
        finish=_FINISH_IN.get(choice.get("finish_reason"), "stop"),
        usage=usage_from_openai(usage, answer.get("service_tier")),
        reasoning_tokens=reasoning_tokens(usage, "completion_tokens_details"),
    )


def text_events(out: list[c.Event], reasoning: object, content: object) -> None:
    """A chunk's delta's reasoning and text, as canonical events."""
    if isinstance(reasoning, str) and reasoning:
        out.append(c.ThinkingDelta(reasoning))
    if content:
        out.append(c.TextDelta(str(content)))


class ChatChunkReader:
    """Upstream ``chat.completion.chunk`` dicts → canonical events."""

    def __init__(self) -> None:
        self._calls: dict[tuple[int, int], str] = {}

    def events(self, chunk: dict[str, Any]) -> list[c.Event]:
        out: list[c.Event] = []
        for position, choice in enumerate(chunk.get("choices") or ()):
            if not isinstance(choice, dict):
                continue
            delta = object_or(choice.get("delta"), {})
            text_events(out, delta.get("reasoning_content") or delta.get("reasoning"), delta.get("content"))
            for number, call in enumerate(delta.get("tool_calls") or ()):
                if not isinstance(call, dict):
                    continue
                index = (choice.get("index", position), call.get("index", number))
                piece = object_or(call.get("custom"), call.get("function") or {})
                if index not in self._calls:
                    self._calls[index] = str(call.get("id") or f"call_{index[1]}")
                    out.append(
                        c.ToolCallStarted(self._calls[index], str(piece.get("name") or ""), custom="custom" in call)
                    )
                fragment = piece.get("input") if "custom" in call else piece.get("arguments")
                if fragment:
                    out.append(c.ToolArgumentsDelta(str(fragment)))
            if choice.get("finish_reason"):
                out.append(c.Finished(_FINISH_IN.get(choice["finish_reason"], "stop")))
        usage = usage_from_openai(chunk.get("usage"), chunk.get("service_tier"))
        if usage is not None:
            out.append(c.UsageReported(usage, reasoning_tokens(chunk.get("usage"), "completion_tokens_details")))
        return out
