"""A Gemini API client's side: its ``generateContent`` request → canonical.

Used when the model's upstream speaks another protocol. Gemini's function calls may come without
ids (its SDK does not require them): a call without one gets an id made from its place in the
conversation (``call_<content>_<part>``), the same every time the conversation is sent, and a
``functionResponse`` without one answers the earliest unanswered call of its name. Its schemas
(OpenAPI's subset, types in capitals) become JSON Schema. What has no canonical form is dropped:
``safetySettings``, ``cachedContent``, ``labels``, the penalties, ``seed``, ``logprobs``,
``responseModalities``, ``speechConfig``, ``mediaResolution`` (docs/api.md, "Gemini").
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from app.errors import InvalidRequest
from app.translate import canonical as c
from app.translate import fields as f
from app.translate.gemini.thoughts import thinking_from_signature

#: Gemini's roles, as the canonical model's (``function``: the older role of function responses).
_ROLES: dict[str, c.Role] = {"user": "user", "model": "assistant", "function": "user"}
#: ``functionCallingConfig.mode`` → the canonical tool choice.
_MODES: dict[str, c.ToolMode] = {"AUTO": "auto", "VALIDATED": "auto", "ANY": "required", "NONE": "none"}
#: Parts that record what Gemini's own tools did (its code runs): another provider cannot take them
#: back, and the answer that followed them stays.
_PROVIDER_PARTS = ("executableCode", "codeExecutionResult", "toolCall", "toolResponse")
#: Tools Gemini runs itself; any other key of a ``tools`` entry is one too.
_CLIENT_TOOL_KEYS = ("functionDeclarations",)


def json_schema(schema: Any) -> Any:
    """A Gemini ``Schema`` (OpenAPI's subset: ``"type": "OBJECT"``, ``nullable``) as JSON Schema."""
    if isinstance(schema, list):
        return [json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out[key] = value.lower()
        elif key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "anyOf", "oneOf", "allOf", "not", "additionalProperties"):
            out[key] = json_schema(value)
        elif key != "propertyOrdering":
            out[key] = value
    if out.pop("nullable", False) is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


class _Calls:
    """The function calls of a conversation, for matching each response to its call."""

    def __init__(self) -> None:
        self._pending: dict[str, deque[str]] = {}

    def call(self, given: str | None, name: str, where: str) -> str:
        call_id = given or "call_" + where.removeprefix("contents.").replace(".parts.", "_")
        self._pending.setdefault(name, deque()).append(call_id)
        return call_id

    def response(self, given: str | None, name: str, where: str) -> str:
        pending = self._pending.get(name) or deque()
        if given:
            if given in pending:
                pending.remove(given)
            return given
        if not pending:
            raise InvalidRequest(
                f"{where}: a functionResponse for {name!r} with no functionCall of that name before it to answer.",
                param=where,
            )
        return pending.popleft()


def _media(blob: dict[str, Any], where: str, key: str) -> c.Image | c.File:
    mime = f.typed(blob.get("mimeType"), str, f"{where}.mimeType")
    if key == "inlineData":
        data = f.present(blob.get("data"), str, f"{where}.data")
        return c.Image(media_type=mime, data=data) if (mime or "").startswith("image/") else c.File(mime, data)
    uri = f.present(blob.get("fileUri"), str, f"{where}.fileUri")
    return c.Image(media_type=mime, url=uri) if (mime or "").startswith("image/") else c.File(mime, url=uri)


def _response_content(response: Any, where: str) -> list[c.Text | c.Image | c.File]:
    """A function's response (any JSON object) as the text a tool result carries: its ``output``
    or ``result`` when that is all it holds as a string, else its JSON."""
    value = f.typed(response, dict, where) or {}
    if (
        len(value) == 1
        and isinstance(only := next(iter(value.values())), str)
        and next(iter(value))
        in (
            "output",
            "result",
        )
    ):
        return [c.Text(only)]
    return [c.Text(json.dumps(value, ensure_ascii=False))]


def _part(part: dict[str, Any], where: str, calls: _Calls) -> list[c.Part]:
    """One part of a content (``where``: its path)."""
    signed = f.typed(part.get("thoughtSignature"), str, f"{where}.thoughtSignature")
    if "text" in part:
        text = f.text(part.get("text"), f"{where}.text")
        if f.typed(part.get("thought"), bool, f"{where}.thought"):
            return [thinking_from_signature(text, signed)]
        return [*_signed(signed), c.Text(text)]
    for key in ("inlineData", "fileData"):
        if key in part:
            return [_media(f.present(part[key], dict, f"{where}.{key}"), f"{where}.{key}", key)]
    if "functionCall" in part:
        call = f.present(part["functionCall"], dict, f"{where}.functionCall")
        name = f.present(call.get("name"), str, f"{where}.functionCall.name")
        args = f.typed(call.get("args"), dict, f"{where}.functionCall.args") or {}
        call_id = calls.call(f.typed(call.get("id"), str, f"{where}.functionCall.id"), name, where)
        return [*_signed(signed), c.ToolCall(call_id, name, json.dumps(args, ensure_ascii=False))]
    if "functionResponse" in part:
        answer = f.present(part["functionResponse"], dict, f"{where}.functionResponse")
        name = f.present(answer.get("name"), str, f"{where}.functionResponse.name")
        call_id = calls.response(f.typed(answer.get("id"), str, f"{where}.functionResponse.id"), name, where)
        return [c.ToolResult(call_id, _response_content(answer.get("response"), f"{where}.functionResponse.response"))]
    if any(key in part for key in _PROVIDER_PARTS) or (signed and part.get("thought")):
        return [*_signed(signed)]
    raise InvalidRequest(
        f"{where}: a part with none of text, inlineData, fileData, functionCall or "
        "functionResponse can only go to a Gemini upstream.",
        param=where,
    )


def _signed(signature: str | None) -> list[c.Part]:
    """The reasoning a part's ``thoughtSignature`` carries back, if it is one Tollgate gave."""
    if not signature:
        return []
    thinking = thinking_from_signature("", signature)
    return [thinking] if thinking.anthropic or thinking.openai else []


def _contents(body: dict[str, Any], req: c.Request) -> None:
    calls = _Calls()
    for i, content in enumerate(f.objects(body.get("contents"), "contents", ".{}")):
        where = f"contents.{i}"
        role = _ROLES.get(str(content.get("role") or "user"))
        if role is None:
            raise InvalidRequest(f"{where}.role: expected 'user' or 'model'.", param=f"{where}.role")
        parts = f.objects(content.get("parts"), f"{where}.parts", ".{}")
        found = [p for j, part in enumerate(parts) for p in _part(part, f"{where}.parts.{j}", calls)]
        c.append_turn(req.messages, role, found)


def _system(body: dict[str, Any], req: c.Request) -> None:
    system = body.get("systemInstruction")
    if isinstance(system, str):
        req.system = [c.Text(system)]
        return
    content = f.typed(system, dict, "systemInstruction") or {}
    for j, part in enumerate(f.objects(content.get("parts"), "systemInstruction.parts", ".{}")):
        req.system.append(c.Text(f.text(part.get("text"), f"systemInstruction.parts.{j}.text")))


def _tools(body: dict[str, Any], req: c.Request) -> None:
    for i, tool in enumerate(f.objects(body.get("tools"), "tools", ".{}")):
        where = f"tools.{i}"
        for j, spec in enumerate(f.objects(tool.get("functionDeclarations"), f"{where}.functionDeclarations", ".{}")):
            at = f"{where}.functionDeclarations.{j}"
            schema = f.typed(spec.get("parametersJsonSchema"), dict, f"{at}.parametersJsonSchema")
            if schema is None:
                schema = json_schema(f.typed(spec.get("parameters"), dict, f"{at}.parameters") or {"type": "object"})
            req.tools.append(
                c.Tool(
                    f.present(spec.get("name"), str, f"{at}.name"),
                    f.typed(spec.get("description"), str, f"{at}.description"),
                    schema,
                )
            )
        for key in tool:
            if key not in _CLIENT_TOOL_KEYS:
                req.builtin_tools.append(c.BuiltinTool(key, {key: tool[key]}))
    config = f.typed(body.get("toolConfig"), dict, "toolConfig") or {}
    calling = f.typed(config.get("functionCallingConfig"), dict, "toolConfig.functionCallingConfig") or {}
    mode = f.typed(calling.get("mode"), str, "toolConfig.functionCallingConfig.mode")
    allowed = f.strings(calling.get("allowedFunctionNames"), "toolConfig.functionCallingConfig.allowedFunctionNames")
    if mode is not None and mode.upper() not in _MODES:
        raise InvalidRequest(
            f"toolConfig.functionCallingConfig.mode: expected AUTO, ANY, NONE or VALIDATED, got {mode!r}.",
            param="toolConfig.functionCallingConfig.mode",
        )
    if mode is not None:
        req.tool_choice = _MODES[mode.upper()]
    if req.tool_choice == "required" and len(allowed) == 1:
        req.tool_choice = c.NamedTool(allowed[0])


def _thinking(config: dict[str, Any], req: c.Request) -> None:
    thinking = f.typed(config.get("thinkingConfig"), dict, "generationConfig.thinkingConfig") or {}
    budget = f.typed(thinking.get("thinkingBudget"), int, "generationConfig.thinkingConfig.thinkingBudget")
    level = f.typed(thinking.get("thinkingLevel"), str, "generationConfig.thinkingConfig.thinkingLevel")
    if level is not None and level.upper() != "THINKING_LEVEL_UNSPECIFIED":
        req.effort = level.lower()
    if budget == 0:
        req.thinking, req.effort = "disabled", req.effort or "none"
    elif budget == -1:
        req.thinking = "adaptive"
    elif budget is not None and budget > 0:
        req.thinking, req.effort = "enabled", req.effort or c.effort_from_budget(budget)
    if f.typed(thinking.get("includeThoughts"), bool, "generationConfig.thinkingConfig.includeThoughts"):
        req.reasoning_summary = "auto"


def _output(config: dict[str, Any], req: c.Request) -> None:
    """Structured output: a JSON schema (``responseJsonSchema``, or ``responseSchema`` in Gemini's
    own form), or JSON without one."""
    mime = f.typed(config.get("responseMimeType"), str, "generationConfig.responseMimeType")
    schema = f.typed(config.get("responseJsonSchema"), dict, "generationConfig.responseJsonSchema")
    if schema is None and (given := f.typed(config.get("responseSchema"), dict, "generationConfig.responseSchema")):
        schema = json_schema(given)
    if schema is not None:
        req.response_format = {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
    elif mime == "application/json":
        req.response_format = {"type": "json_object"}


def generation_config(body: dict[str, Any]) -> dict[str, Any]:
    return f.typed(body.get("generationConfig"), dict, "generationConfig") or {}


def _generation(body: dict[str, Any], req: c.Request) -> None:
    config = generation_config(body)
    count = f.typed(config.get("candidateCount"), int, "generationConfig.candidateCount")
    if count is not None and count != 1:
        raise InvalidRequest(
            f"generationConfig.candidateCount: this gateway answers one candidate, got {count}.",
            param="generationConfig.candidateCount",
        )
    req.temperature = f.number(config, "temperature")
    req.top_p = f.number(config, "topP")
    top_k = f.number(config, "topK")
    req.top_k = int(top_k) if top_k is not None else None
    req.max_output_tokens = f.typed(config.get("maxOutputTokens"), int, "generationConfig.maxOutputTokens")
    req.stop = f.strings(config.get("stopSequences"), "generationConfig.stopSequences")
    _thinking(config, req)
    _output(config, req)


def gemini_request_to_canonical(body: dict[str, Any]) -> c.Request:
    """A ``generateContent`` body (its ``model`` and ``stream`` set by the route from the URL)."""
    req = c.Request(model=str(body.get("model")), messages=[])
    _system(body, req)
    _contents(body, req)
    _tools(body, req)
    _generation(body, req)
    req.stream = bool(body.get("stream"))
    return req
