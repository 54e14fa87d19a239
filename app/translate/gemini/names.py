"""A Gemini request's field names as Google documents them (camelCase).

Google's API reads a request's fields in either spelling (``mime_type`` or ``mimeType``, as protobuf's
JSON mapping does), and its own SDK sends some in snake_case (an inline image's ``mime_type``), with
its bytes in URL-safe base64. So a body is read once into one spelling, the structure only — never
the client's own data (a function's ``args`` and ``response``, a schema's property names) — and its
inline data into standard base64, which every provider takes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _keys(value: Any, inner: dict[str, Callable[[Any], Any]] | None = None) -> Any:
    """``value``'s keys in camelCase; ``inner``: how the value under each key is read in turn
    (a key not named there keeps its value as it is)."""
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = camel(key) if isinstance(key, str) else key
        read = (inner or {}).get(name)
        out[name] = read(item) if read is not None else item
    return out


def _each(read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda items: [read(item) for item in items] if isinstance(items, list) else items


def _blob(value: Any) -> Any:
    blob = _keys(value)
    if isinstance(blob, dict) and isinstance(blob.get("data"), str):
        blob["data"] = blob["data"].replace("-", "+").replace("_", "/")
    return blob


def _part(value: Any) -> Any:
    return _keys(value, {"inlineData": _blob, "fileData": _keys, "functionCall": _keys, "functionResponse": _keys})


def _content(value: Any) -> Any:
    return value if isinstance(value, str) else _keys(value, {"parts": _each(_part)})


def _tool(value: Any) -> Any:
    return _keys(value, {"functionDeclarations": _each(_keys)})


def _generation(value: Any) -> Any:
    return _keys(value, {"thinkingConfig": _keys})


def _tool_config(value: Any) -> Any:
    return _keys(value, {"functionCallingConfig": _keys})


_BODY: dict[str, Callable[[Any], Any]] = {
    "contents": _each(_content),
    "systemInstruction": _content,
    "tools": _each(_tool),
    "toolConfig": _tool_config,
    "generationConfig": _generation,
    "generateContentRequest": lambda value: camel_body(value) if isinstance(value, dict) else value,
}


def camel_body(body: dict[str, Any]) -> dict[str, Any]:
    """A request body (``generateContent``'s or ``countTokens``') in Google's documented spelling."""
    out: dict[str, Any] = _keys(body, _BODY)
    return out
