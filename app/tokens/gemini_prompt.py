"""A Gemini ``generateContent`` body's prompt tokens, under one model's rules, counted like the other
three wires' (``app/tokens/prompt.py``): its system instruction, its contents' parts (text, inline
images, function calls and responses), its function declarations and its response schema.

A thought's signature is opaque and not counted; a file by URI (``fileData``) is not either (only the
provider knows its size). A part or field not known here is counted as its JSON text.
"""

from __future__ import annotations

from typing import Any

from app.tokens.counting import Rules
from app.tokens.image_size import size_of_base64
from app.tokens.prompt import Tally

#: The top-level fields that carry no prompt text of their own (or that the counter reads itself);
#: ``model``, ``stream`` and ``alt`` are the URL's, set in the body by the route.
_FIELDS = frozenset(
    {
        "model",
        "stream",
        "alt",
        "contents",
        "systemInstruction",
        "system_instruction",
        "tools",
        "toolConfig",
        "generationConfig",
        "safetySettings",
        "cachedContent",
        "labels",
    }
)


def _part(tally: Tally, part: Any) -> None:
    if not isinstance(part, dict):
        return
    if "text" in part:
        tally.text(part.get("text"))
    elif isinstance(blob := part.get("inlineData"), dict):
        data, mime = blob.get("data"), blob.get("mimeType")
        if isinstance(mime, str) and mime.startswith("image/"):
            tally.image(size_of_base64(data) if isinstance(data, str) else None)
    elif "fileData" in part:
        if str((part.get("fileData") or {}).get("mimeType", "")).startswith("image/"):
            tally.image(None)
    elif isinstance(call := part.get("functionCall"), dict):
        tally.tool_call(call.get("id"), call.get("name"))
        tally.as_json(call.get("args"))
    elif isinstance(answer := part.get("functionResponse"), dict):
        tally.tool_call(answer.get("id"), answer.get("name"))
        tally.as_json(answer.get("response"))
    else:
        tally.unknown({k: v for k, v in part.items() if k != "thoughtSignature"})


def _content(tally: Tally, content: Any, role: Any = None) -> None:
    if isinstance(content, str):
        tally.message(role)
        tally.text(content)
        return
    if not isinstance(content, dict):
        return
    tally.message(content.get("role") or role or "user")
    parts = content.get("parts")
    for part in parts if isinstance(parts, list) else ():
        _part(tally, part)


def gemini_prompt(body: dict[str, Any], rules: Rules) -> Tally:
    tally = Tally(rules)
    system = body.get("systemInstruction")
    if system:
        _content(tally, system, "system")
    contents = body.get("contents")
    for content in contents if isinstance(contents, list) else ():
        _content(tally, content)
    tools = body.get("tools")
    declared = [
        spec
        for tool in (tools if isinstance(tools, list) else ())
        if isinstance(tool, dict)
        for spec in (
            tool.get("functionDeclarations") or [] if isinstance(tool.get("functionDeclarations"), list) else []
        )
    ]
    tally.tools(declared)
    config = body.get("generationConfig")
    if isinstance(config, dict):
        tally.as_json(config.get("responseJsonSchema") or config.get("responseSchema"))
    tally.fields(body, _FIELDS)
    return tally
