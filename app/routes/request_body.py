"""Reading a JSON request body and checking the fields every endpoint needs, with clear errors."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from app.errors import InvalidRequest
from app.json import decode

T = TypeVar("T")


def read_json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = decode(raw)
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"We could not parse the JSON body of your request: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    return body


def require(body: dict[str, Any], *names: str) -> None:
    for name in names:
        if body.get(name) is None:
            raise InvalidRequest(f"Missing required parameter: '{name}'.", param=name)


def validate(body: dict[str, Any], schema: type[T]) -> T:
    """Check the types of the fields Tollgate reads itself; others pass through untouched."""
    try:
        return msgspec.convert(body, schema)
    except msgspec.ValidationError as exc:
        problem, _, where = str(exc).partition(" - at `$")
        param = where.rstrip("`").lstrip(".") or None
        text = f"Invalid value for '{param}': {problem}." if param else f"Invalid request: {problem}."
        raise InvalidRequest(text, param=param) from None


def check_positive(value: int | None, name: str) -> None:
    if value is not None and value < 1:
        raise InvalidRequest(f"Invalid '{name}': expected a value >= 1, but got {value} instead.", param=name)
