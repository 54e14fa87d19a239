"""A Gemini upstream's side: canonical requests → ``generateContent`` bodies, its answers → canonical.

Gemini names a function's result by the function's name, not only by the call's id, so a tool
result is written with the name of the call it answers (found in the turns before it). Gemini
bills its thoughts as output: ``thoughtsTokenCount`` joins ``candidatesTokenCount`` in the output
count, and its prompt count includes the cached tokens, which are taken out and billed as cache hits.

Gemini's own reasoning state (``thoughtSignature``) cannot be carried through another wire's client,
so a function call sent back without it gets the value Google documents for history it did not
write (``skip_thought_signature_validator``); Gemini 3 refuses a function call without one.

The body keeps the gateway's ``model`` and ``stream``: the adapter (``app/upstream/gemini.py``) puts
them into the URL and takes them out of what it sends.
"""

from __future__ import annotations

import json
from typing import Any

from app.json import object_or
from app.translate import canonical as c
from app.translate.tools import ToolNames
from domain.usage import TokenUsage

#: Google's value for a function call whose thought signature is not Gemini's own.
SKIP_SIGNATURE = "skip_thought_signature_validator"

_FINISH_IN: dict[object, c.Finish] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}
_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


def usage_from_gemini(meta: Any) -> TokenUsage | None:
    """``usageMetadata`` by billing kind (None without a prompt count)."""
    if not isinstance(meta, dict) or not isinstance(meta.get("promptTokenCount"), int):
        return None
    counts = {k: v if isinstance(v := meta.get(k), int) and v > 0 else 0 for k in _COUNTS}
    prompt = counts["promptTokenCount"] + counts["toolUsePromptTokenCount"]
    cached = min(counts["cachedContentTokenCount"], prompt)
    return TokenUsage(
        input_tokens=prompt - cached,
        output_tokens=counts["candidatesTokenCount"] + counts["thoughtsTokenCount"],
        cache_hit_tokens=cached,
    )


_COUNTS = (
    "promptTokenCount",
    "toolUsePromptTokenCount",
    "cachedContentTokenCount",
    "candidatesTokenCount",
    "thoughtsTokenCount",
)


def thoughts_tokens(meta: Any) -> int:
    value = meta.get("thoughtsTokenCount") if isinstance(meta, dict) else None
    return value if isinstance(value, int) and value > 0 else 0


# -- requests ------------------------------------------------------------------------------------


def _media(part: c.Image | c.File) -> dict[str, Any]:
    if part.data:
        return {"inlineData": {"mimeType": part.media_type or "application/octet-stream", "data": part.data}}
    return {"fileData": {"fileUri": part.url or "", "mimeType": part.media_type or "application/octet-stream"}}


def _result(result: c.ToolResult, name: str) -> dict[str, Any]:
    text = "".join(x.text for x in result.content if isinstance(x, c.Text))
    response = {"error": text} if result.is_error else {"output": text}
    return {"functionResponse": {"id": result.call_id, "name": name, "response": response}}


def _arguments(call: c.ToolCall, names: ToolNames) -> dict[str, Any]:
    try:
        value = json.loads(names.call_arguments(call) or "{}")
    except json.JSONDecodeError:
        return {"input": call.arguments}
    return value if isinstance(value, dict) else {"input": value}


class _Turns:
    """The conversation as Gemini ``contents``, remembering each call's name for its result."""

    def __init__(self, names: ToolNames) -> None:
        self.names = names
        self.called: dict[str, str] = {}
        self.contents: list[dict[str, Any]] = []

    def add(self, role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if self.contents and self.contents[-1]["role"] == role:
            self.contents[-1]["parts"].extend(parts)
        else:
            self.contents.append({"role": role, "parts": parts})

    def part(self, p: c.Part) -> list[dict[str, Any]]:
        if isinstance(p, c.Text):
            return [{"text": p.text}] if p.text else []
        if isinstance(p, c.Image | c.File):
            return [_media(p)]
        if isinstance(p, c.ToolCall):
            name = self.names.upstream_name(p.name, p.namespace)
            self.called[p.id] = name
            call = {"id": p.id, "name": name, "args": _arguments(p, self.names)}
            return [{"functionCall": call, "thoughtSignature": SKIP_SIGNATURE}]
        if isinstance(p, c.ToolResult):
            media = [_media(x) for x in p.content if isinstance(x, c.Image | c.File)]
            return [_result(p, self.called.get(p.call_id, "tool")), *media]
        return []  # reasoning from another provider: Gemini takes back only its own


def _contents(req: c.Request, names: ToolNames) -> tuple[list[dict[str, Any]], list[str]]:
    """The turns, and the system text said in their midst (Gemini has one system instruction)."""
    turns, system = _Turns(names), []
    for m in req.messages:
        if m.role == "system":
            system += [p.text for p in m.parts if isinstance(p, c.Text)]
            continue
        turns.add("model" if m.role == "assistant" else "user", [x for p in m.parts for x in turns.part(p)])
    return turns.contents, system


def _tools(req: c.Request, names: ToolNames) -> dict[str, Any]:
    declarations = []
    for tool in req.tools:
        name, description, parameters = names.definition(tool)
        declaration: dict[str, Any] = {"name": name, "parametersJsonSchema": parameters}
        if description:
            declaration["description"] = description
        declarations.append(declaration)
    out: dict[str, Any] = {}
    if declarations:
        out["tools"] = [{"functionDeclarations": declarations}]
    choice = req.tool_choice
    if declarations and isinstance(choice, c.NamedTool):
        only = names.upstream_name(choice.name, choice.namespace)
        out["toolConfig"] = {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [only]}}
    elif declarations and isinstance(choice, str):
        out["toolConfig"] = {"functionCallingConfig": {"mode": _MODES[choice]}}
    return out


def _generation_config(req: c.Request) -> dict[str, Any]:
    config: dict[str, Any] = {
        k: v
        for k, v in (
            ("maxOutputTokens", req.max_output_tokens),
            ("temperature", req.temperature),
            ("topP", req.top_p),
            ("topK", req.top_k),
            ("stopSequences", req.stop or None),
        )
        if v is not None
    }
    fmt = req.response_format or {}
    if fmt.get("type") == "json_schema":
        config["responseMimeType"] = "application/json"
        schema = object_or(fmt.get("json_schema"), {}).get("schema")
        if isinstance(schema, dict):
            config["responseJsonSchema"] = schema
    elif fmt.get("type") == "json_object":
        config["responseMimeType"] = "application/json"
    if req.thinking == "disabled" or req.effort in ("none", "minimal"):
        config["thinkingConfig"] = {"thinkingBudget": 0}
    elif req.effort in c.THINKING_BUDGETS:
        config["thinkingConfig"] = {"thinkingBudget": c.THINKING_BUDGETS[req.effort], "includeThoughts": True}
    return config


def canonical_to_gemini_body(req: c.Request, upstream_model: str, names: ToolNames) -> dict[str, Any]:
    contents, midst = _contents(req, names)
    body: dict[str, Any] = {"model": upstream_model, "contents": contents, **_tools(req, names)}
    system = [t.text for t in req.system] + midst
    if system:
        body["systemInstruction"] = {"parts": [{"text": "\n".join(system)}]}
    if config := _generation_config(req):
        body["generationConfig"] = config
    body["stream"] = req.stream
    return body


# -- answers -------------------------------------------------------------------------------------


class _Calls:
    """Ids for function calls that came without one, numbered in the answer's order."""

    def __init__(self, response_id: str) -> None:
        self._prefix = f"call_{response_id[:12]}_" if response_id else "call_"
        self._count = 0

    def id_of(self, call: dict[str, Any]) -> str:
        self._count += 1
        given = call.get("id")
        return given if isinstance(given, str) and given else f"{self._prefix}{self._count}"


def _parts_of(chunk: dict[str, Any]) -> tuple[list[Any], object]:
    candidates = chunk.get("candidates")
    first = candidates[0] if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict) else {}
    content = object_or(first.get("content"), {})
    parts = content.get("parts")
    return (parts if isinstance(parts, list) else []), first.get("finishReason")


def _finish(reason: object, called: bool) -> c.Finish:
    return "tool_calls" if called and reason in (None, "STOP") else _FINISH_IN.get(reason, "stop")


def gemini_response_to_canonical(answer: dict[str, Any]) -> c.Response:
    parts_in, reason = _parts_of(answer)
    calls = _Calls(str(answer.get("responseId") or ""))
    parts: list[c.Text | c.ToolCall | c.Thinking] = []
    for part in (p for p in parts_in if isinstance(p, dict)):
        if isinstance(call := part.get("functionCall"), dict):
            args = json.dumps(call.get("args") or {}, separators=(",", ":"))
            parts.append(c.ToolCall(calls.id_of(call), str(call.get("name") or ""), args))
        elif part.get("thought") is True:
            parts.append(c.Thinking(str(part.get("text") or "")))
        elif isinstance(part.get("text"), str):
            parts.append(c.Text(part["text"]))
    meta = answer.get("usageMetadata")
    return c.Response(
        id=str(answer.get("responseId") or ""),
        model=str(answer.get("modelVersion") or ""),
        parts=parts,
        finish=_finish(reason, any(isinstance(p, c.ToolCall) for p in parts)),
        usage=usage_from_gemini(meta),
        reasoning_tokens=thoughts_tokens(meta),
    )


class GeminiChunkReader:
    """``streamGenerateContent`` chunks → canonical events: each chunk holds the next parts (text,
    thoughts, whole function calls) and the usage so far; the last one its finish reason."""

    def __init__(self) -> None:
        self._calls: _Calls | None = None
        self._called = False

    def events(self, chunk: dict[str, Any]) -> list[c.Event]:
        if self._calls is None:
            self._calls = _Calls(str(chunk.get("responseId") or ""))
        parts, reason = _parts_of(chunk)
        out: list[c.Event] = []
        for part in (p for p in parts if isinstance(p, dict)):
            if isinstance(call := part.get("functionCall"), dict):
                self._called = True
                out.append(c.ToolCallStarted(self._calls.id_of(call), str(call.get("name") or "")))
                out.append(c.ToolArgumentsDelta(json.dumps(call.get("args") or {}, separators=(",", ":"))))
            elif part.get("thought") is True and part.get("text"):
                out.append(c.ThinkingDelta(str(part["text"])))
            elif isinstance(part.get("text"), str) and part["text"]:
                out.append(c.TextDelta(part["text"]))
        if reason is not None:
            out.append(c.Finished(_finish(reason, self._called)))
        meta = chunk.get("usageMetadata")
        if (usage := usage_from_gemini(meta)) is not None:
            out.append(c.UsageReported(usage, thoughts_tokens(meta), partial=reason is None))
        return out
