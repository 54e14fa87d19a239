"""Reading a JSON request body and checking the fields every endpoint needs, with clear errors."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from litestar import Request

from app.errors import InvalidRequest
from app.json import decode
from app.observability.record import current_record
from domain.settings import Model

T = TypeVar("T")


def json_depth(value: Any, limit: int) -> int:
    """How deeply a decoded JSON ``value`` nests its arrays and objects, counted level by level
    without recursion, and only until it passes ``limit`` (then ``limit + 1``). It walks the
    containers (a body's few hundred, for a coding agent's 50 KB prompt: about 50 µs); finding the
    depth in the bytes instead, by cutting the strings and their escapes out, copied the body five
    times and cost ten times as much."""
    level = [value] if type(value) is dict or type(value) is list else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            break
        level = [
            child
            for container in level
            for child in (container.values() if type(container) is dict else container)
            if type(child) is dict or type(child) is list
        ]
    return depth


def read_json_object(raw: bytes, max_depth: int) -> dict[str, Any]:
    """The body as a JSON object, or a 400: not JSON, not UTF-8, or nested deeper than ``max_depth``
    (refused before anything else reads it, so no code that walks the body recursively ever meets
    it; the decoder itself refuses nesting past the interpreter's recursion limit, as deep)."""
    too_deep = InvalidRequest(
        f"The JSON body of your request nests arrays and objects more than {max_depth} levels deep."
    )
    try:
        body = decode(raw)
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"We could not parse the JSON body of your request: {exc}") from None
    except UnicodeDecodeError:
        raise InvalidRequest("We could not parse the JSON body of your request: it is not valid UTF-8.") from None
    except RecursionError:
        raise too_deep from None
    if json_depth(body, max_depth) > max_depth:
        raise too_deep
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    return body


async def request_json(request: Request[Any, Any, Any], default: bytes | None = None) -> dict[str, Any]:
    """The request's JSON object body (``default`` when it is empty), within the configured depth."""
    raw = await request.body()
    if not raw and default is not None:
        raw = default
    return read_json_object(raw, request.app.state.runtime.settings.max_json_depth)


def note_stream(body: dict[str, Any]) -> None:
    """Note on the request's record whether the client asked for a stream, as soon as its body is
    read: its log line says what was asked, whatever refuses the request afterwards."""
    record = current_record()
    if record is not None:
        record.stream = body.get("stream") is True


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


def check_output_limit(requested: int | None, model: Model, param: str) -> int | None:
    """The output limit a request is served with: the one it asked for, within what the model can
    produce. Above that it is a client error (400), not a silent clamp — unless the model's
    configuration opts in (``clamp_output_to_model``): then it is the model's own limit, which the
    answer says (``x-tollgate-output-clamped``, set where the request is served)."""
    if requested is None or requested <= model.max_output_tokens:
        return requested
    if model.clamp_output_to_model:
        return model.max_output_tokens
    raise InvalidRequest(
        f"'{param}' is {requested}, but the model `{model.id}` produces at most "
        f"{model.max_output_tokens} output tokens.",
        param=param,
    )
