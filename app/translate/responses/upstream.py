"""A Responses API upstream's side: canonical requests → its wire, its answers → canonical.

Also what the pass-through reads of a Responses answer (its usage, its events' text), since a
request passed through is billed from the same readings. Translated requests never rely on the
upstream's stored state: ``store`` is false unless the client asked, and reasoning comes back
encrypted, so that it can be sent back on the next turn.
"""

from __future__ import annotations

from typing import Any

from app.json import object_or
from app.translate import canonical as c
from app.translate.chat.upstream import split_prompt
from app.translate.images import file_to_data_url, image_to_url
from domain.usage import TokenUsage, tool_calls_of

#: The Responses API refuses a smaller output limit.
MIN_OUTPUT_TOKENS = 16


#: A Responses output item that is a provider-run tool's call → the tool a fee is priced for.
TOOL_CALL_ITEMS = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_interpreter",
}


def usage_from_responses(usage: Any, response: Any = None) -> TokenUsage | None:
    """Usage as the Responses API reports it (cached tokens are part of ``input_tokens``), with
    the tier ``response`` says it was served at and the tool calls among its output items."""
    if not isinstance(usage, dict):
        return None
    prompt, output = usage.get("input_tokens"), usage.get("output_tokens")
    if not isinstance(prompt, int) or not isinstance(output, int) or prompt < 0 or output < 0:
        return None
    response = response if isinstance(response, dict) else {}
    return split_prompt(
        prompt,
        output,
        usage.get("input_tokens_details"),
        response.get("service_tier"),
        tool_calls_in(response.get("output")),
    )


def tool_calls_in(output: Any) -> tuple[tuple[str, int], ...]:
    """The provider-run tool calls among a response's output items, by tool."""
    calls: dict[str, int] = {}
    for item in output if isinstance(output, list) else ():
        tool = TOOL_CALL_ITEMS.get(str(item.get("type"))) if isinstance(item, dict) else None
        if tool is not None:
            calls[tool] = calls.get(tool, 0) + 1
    return tool_calls_of(calls)


def reasoning_tokens(usage: Any) -> int:
    details = usage.get("output_tokens_details") if isinstance(usage, dict) else None
    value = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return value if isinstance(value, int) and value > 0 else 0


# -- requests ------------------------------------------------------------------------------------


def _part(part: c.Part, role: str) -> dict[str, Any]:
    if isinstance(part, c.Text):
        return {"type": "output_text" if role == "assistant" else "input_text", "text": part.text}
    if isinstance(part, c.Image):
        return {"type": "input_image", "image_url": image_to_url(part), "detail": "auto"}
    assert isinstance(part, c.File)
    if part.url:
        return {"type": "input_file", "file_url": part.url}
    return {"type": "input_file", "file_data": file_to_data_url(part), "filename": part.filename or "file"}


def _items(req: c.Request) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for m in req.messages:
        role = "developer" if m.role == "system" else m.role
        content = [_part(p, role) for p in m.parts if isinstance(p, c.Text | c.Image | c.File)]
        for p in m.parts:
            if isinstance(p, c.Thinking) and p.openai:  # OpenAI only takes back its own reasoning
                items.append({"type": "reasoning", "id": p.item_id, "summary": [], "encrypted_content": p.encrypted})
            elif isinstance(p, c.ToolCall):
                call = (
                    {"type": "custom_tool_call", "call_id": p.id, "name": p.name, "input": p.arguments}
                    if p.custom
                    else {"type": "function_call", "call_id": p.id, "name": p.name, "arguments": p.arguments}
                )
                items.append({**call, **({"namespace": p.namespace} if p.namespace else {})})
            elif isinstance(p, c.ToolResult):
                texts = [x for x in p.content if isinstance(x, c.Text)]
                output: Any = (
                    "".join(x.text for x in texts)
                    if len(texts) == len(p.content)
                    else [_part(x, "user") for x in p.content]
                )
                items.append(
                    {
                        "type": "custom_tool_call_output" if p.custom else "function_call_output",
                        "call_id": p.call_id,
                        "output": output,
                    }
                )
        if content:
            items.append({"type": "message", "role": role, "content": content})
    return items


def _tool(tool: c.Tool) -> dict[str, Any]:
    if tool.custom:
        spec: dict[str, Any] = {"type": "custom", "name": tool.name}
        if tool.format:
            spec["format"] = tool.format
    else:
        spec = {
            "type": "function",
            "name": tool.name,
            "parameters": tool.parameters or {"type": "object", "properties": {}},
            "strict": bool(tool.strict),
        }
    if tool.description:
        spec["description"] = tool.description
    return spec


def _tools(req: c.Request) -> list[dict[str, Any]]:
    """Function and custom tools, those of a namespace grouped again under it."""
    tools: list[dict[str, Any]] = []
    groups: dict[str, dict[str, Any]] = {}
    for tool in req.tools:
        if tool.namespace is None:
            tools.append(_tool(tool))
            continue
        if tool.namespace not in groups:
            groups[tool.namespace] = {"type": "namespace", "name": tool.namespace, "description": "", "tools": []}
            tools.append(groups[tool.namespace])
        groups[tool.namespace]["tools"].append(_tool(tool))
    return tools + [b.spec for b in req.builtin_tools]  # built-ins the model's policy passes on


def _text_options(req: c.Request) -> dict[str, Any]:
    """The Responses ``text`` object: the output's format (from Chat's ``response_format``) and verbosity."""
    text: dict[str, Any] = {}
    fmt = req.response_format or {}
    if fmt.get("type") == "json_schema":
        schema = fmt.get("json_schema") or {}
        text["format"] = {
            "type": "json_schema",
            "name": schema.get("name") or "output",
            "schema": schema.get("schema") or {},
            **{k: schema[k] for k in ("strict", "description") if k in schema},
        }
    elif fmt.get("type") == "json_object":
        text["format"] = {"type": "json_object"}
    if req.verbosity is not None:
        text["verbosity"] = req.verbosity
    return text


def canonical_to_responses_body(req: c.Request, upstream_model: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": upstream_model,
        "input": _items(req),
        "store": bool(req.store),
        "include": ["reasoning.encrypted_content"],
    }
    if req.system:
        body["instructions"] = "\n".join(t.text for t in req.system)
    tools = _tools(req)
    if tools:
        body["tools"] = tools
        if isinstance(req.tool_choice, c.NamedTool):
            body["tool_choice"] = {"type": "function", "name": req.tool_choice.name}
        elif req.tool_choice is not None:
            body["tool_choice"] = req.tool_choice
        if req.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = req.parallel_tool_calls
    reasoning: dict[str, Any] = {}
    if req.effort is not None:
        reasoning["effort"] = req.effort
    if req.reasoning_summary is not None:
        reasoning["summary"] = req.reasoning_summary
    if reasoning:
        body["reasoning"] = reasoning
    text = _text_options(req)
    if text:
        body["text"] = text
    optional = {
        "max_output_tokens": max(req.max_output_tokens, MIN_OUTPUT_TOKENS) if req.max_output_tokens else None,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "metadata": req.metadata,
        "safety_identifier": req.user,
        "service_tier": req.service_tier,
        "prompt_cache_key": req.prompt_cache_key,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    if req.stream:
        body["stream"] = True
    return body


# -- answers -------------------------------------------------------------------------------------


def _reasoning(item: dict[str, Any]) -> c.Thinking:
    summary = "\n\n".join(str(s.get("text") or "") for s in item.get("summary") or () if isinstance(s, dict))
    return c.Thinking(summary, item_id=item.get("id"), encrypted=item.get("encrypted_content"))


def _call(item: dict[str, Any]) -> c.ToolCall:
    custom = item.get("type") == "custom_tool_call"
    return c.ToolCall(
        str(item.get("call_id")),
        str(item.get("name")),
        str(item.get("input") if custom else item.get("arguments") or ""),
        item.get("namespace"),
        custom,
    )


def finish_of(response: dict[str, Any], called_tools: bool) -> c.Finish:
    details = object_or(response.get("incomplete_details"), {})
    if response.get("status") == "incomplete":
        return "content_filter" if details.get("reason") == "content_filter" else "length"
    return "tool_calls" if called_tools else "stop"


def response_to_canonical(answer: dict[str, Any]) -> c.Response:
    parts: list[c.Text | c.ToolCall | c.Thinking] = []
    for item in answer.get("output") or ():
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, dict) and part.get("type") in ("output_text", "refusal"):
                    parts.append(c.Text(str(part.get("text") or part.get("refusal") or "")))
        elif kind in ("function_call", "custom_tool_call"):
            parts.append(_call(item))
        elif kind == "reasoning":
            parts.append(_reasoning(item))
    usage = answer.get("usage")
    return c.Response(
        id=str(answer.get("id") or ""),
        model=str(answer.get("model") or ""),
        parts=parts,
        finish=finish_of(answer, any(isinstance(p, c.ToolCall) for p in parts)),
        usage=usage_from_responses(usage, answer),
        reasoning_tokens=reasoning_tokens(usage),
    )


class ResponsesEventReader:
    """Upstream Responses events → canonical events."""

    def __init__(self) -> None:
        self._called = False

    def events(self, event: dict[str, Any]) -> list[c.Event]:
        kind = event.get("type")
        item = object_or(event.get("item"), {})
        if kind == "response.output_item.added" and item.get("type") in ("function_call", "custom_tool_call"):
            self._called = True
            call = _call(item)
            started: list[c.Event] = [c.ToolCallStarted(call.id, call.name, call.namespace, call.custom)]
            return started + ([c.ToolArgumentsDelta(call.arguments)] if call.arguments else [])
        if kind == "response.output_item.done" and item.get("type") == "reasoning":
            return [c.ThinkingSealed(item_id=item.get("id"), encrypted=item.get("encrypted_content"))]
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            return [c.TextDelta(str(event.get("delta") or ""))]
        if kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            return [c.ToolArgumentsDelta(str(event.get("delta") or ""))]
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return [c.ThinkingDelta(str(event.get("delta") or ""))]
        if kind in ("response.completed", "response.incomplete"):
            response = object_or(event.get("response"), {})
            out: list[c.Event] = [c.Finished(finish_of(response, self._called))]
            usage = usage_from_responses(response.get("usage"), response)
            if usage is not None:
                out.append(c.UsageReported(usage, reasoning_tokens(response.get("usage"))))
            return out
        return []
