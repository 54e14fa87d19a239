"""Reading a client's fields for translation: the type each must have, or a 400 that names it.

Translation reads fields the gateway does not otherwise check; a field of the wrong type must be
the client's error in its own protocol's shape, never a crash (a 500 that SDKs would retry).
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from app.errors import InvalidRequest
from app.translate import canonical as c

T = TypeVar("T")

_NAMES = {str: "a string", bool: "a boolean", dict: "an object", list: "an array", int: "an integer"}


def typed(value: Any, kind: type[T] | tuple[type, ...], where: str) -> T | None:
    """``value`` if it is of ``kind`` (None passes), else a 400 naming ``where``."""
    if value is None:
        return None
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise InvalidRequest(f"Invalid type for '{where}': expected a number, but got a boolean.", param=where)
    if not isinstance(value, kind):
        expected = _NAMES.get(kind, "a number") if isinstance(kind, type) else "a number"
        raise InvalidRequest(
            f"Invalid type for '{where}': expected {expected}, but got {type(value).__name__}.", param=where
        )
    return cast(T, value)  # checked just above (a tuple of kinds leaves T open: number() reads it as a float)


def field(body: dict[str, Any], key: str, kind: type[T] | tuple[type, ...], where: str | None = None) -> T | None:
    return typed(body.get(key), kind, where or key)


def number(body: dict[str, Any], key: str) -> float | None:
    return typed(body.get(key), (int, float), key)


def present(value: Any, kind: type[T], where: str) -> T:
    """``value`` if it is of ``kind``; anything else, None included, is a 400 naming ``where``."""
    if value is None:
        raise InvalidRequest(
            f"Invalid type for '{where}': expected {_NAMES.get(kind, 'a value')}, but got null.", param=where
        )
    return cast(T, typed(value, kind, where))  # never None: None was refused above


def objects(value: Any, where: str, sep: str = "[{}]") -> list[dict[str, Any]]:
    """A list whose items are all objects (None: an empty list). ``sep``: how an item's index is
    written in ``where`` (``[0]`` in OpenAI's wording, ``.0`` in Anthropic's)."""
    items = typed(value, list, where) or []
    for i, item in enumerate(items):
        present(item, dict, where + sep.format(i))
    return items


def strings(value: Any, where: str) -> list[str]:
    """A string or a list of strings, as a list."""
    if isinstance(value, str):
        return [value]
    items = typed(value, list, where) or []
    for i, item in enumerate(items):
        present(item, str, f"{where}[{i}]")
    return items


def text(value: Any, where: str) -> str:
    """An optional string field as text (absent: empty)."""
    return typed(value, str, where) or ""


def string_map(value: Any, where: str) -> dict[str, Any] | None:
    return typed(value, dict, where)


def function_tool(spec: dict[str, Any], where: str, namespace: str | None = None, custom: bool = False) -> c.Tool:
    """A tool the client runs (``spec``: its name, description, parameters, format, strictness)."""
    return c.Tool(
        present(spec.get("name"), str, f"{where}.name"),
        typed(spec.get("description"), str, f"{where}.description"),
        typed(spec.get("parameters"), dict, f"{where}.parameters") or {},
        namespace,
        custom=custom,
        format=typed(spec.get("format"), dict, f"{where}.format"),
        strict=typed(spec.get("strict"), bool, f"{where}.strict"),
    )


def openai_parameters(body: dict[str, Any], req: c.Request) -> None:
    """The parameters Chat Completions and Responses requests share, read into ``req``."""
    req.temperature = number(body, "temperature")
    req.top_p = number(body, "top_p")
    req.parallel_tool_calls = field(body, "parallel_tool_calls", bool)
    req.user = field(body, "user", str) or field(body, "safety_identifier", str)
    req.metadata = string_map(body.get("metadata"), "metadata")
    req.store = field(body, "store", bool)
    req.service_tier = field(body, "service_tier", str)
    req.prompt_cache_key = field(body, "prompt_cache_key", str)
    req.stream = bool(body.get("stream"))
