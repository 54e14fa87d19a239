"""Reading a JSON request body and checking the fields every endpoint needs, with clear errors."""

from __future__ import annotations

from array import array
from itertools import accumulate
from typing import Any, TypeVar

import msgspec
from litestar import Request

from app.errors import InvalidRequest
from app.json import decode
from domain.settings import Model

T = TypeVar("T")

#: Brackets as +1 (opening) and -1 (closing, as a signed byte); every other byte is deleted.
_NESTING = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth(raw: bytes, limit: int) -> int:
    """How deeply ``raw`` nests its arrays and objects (exact for valid JSON), found without
    recursion and in C loops (tens of milliseconds for megabytes): escapes and strings are cut out,
    what is left is brackets, and the running sum of +1/-1 peaks at the depth. 0 when it cannot
    exceed ``limit`` (there are no more brackets than that)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return 0
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    structure = b"".join(unescaped.split(b'"')[::2]).translate(_NESTING, _NOT_BRACKETS)
    return max(accumulate(array("b", structure)), default=0)


def read_json_object(raw: bytes, max_depth: int) -> dict[str, Any]:
    """The body as a JSON object, or a 400: not JSON, not UTF-8, or nested deeper than ``max_depth``
    (refused before decoding, so no code that walks the body recursively ever meets it)."""
    if json_depth(raw, max_depth) > max_depth:
        raise InvalidRequest(f"The JSON body of your request nests arrays and objects more than {max_depth} "
                             "levels deep.")
    try:
        body = decode(raw)
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"We could not parse the JSON body of your request: {exc}") from None
    except UnicodeDecodeError:
        raise InvalidRequest("We could not parse the JSON body of your request: it is not valid UTF-8.") from None
    except RecursionError:  # only if max_depth were set past what the decoder can nest
        raise InvalidRequest("The JSON body of your request nests arrays and objects too deeply.") from None
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    return body


async def request_json(request: Request[Any, Any, Any], default: bytes | None = None) -> dict[str, Any]:
    """The request's JSON object body (``default`` when it is empty), within the configured depth."""
    raw = await request.body()
    if not raw and default is not None:
        raw = default
    return read_json_object(raw, request.app.state.runtime.settings.max_json_depth)


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


def check_output_limit(requested: int | None, model: Model, param: str) -> None:
    """An output limit above what the model can produce is a client error, not a silent clamp."""
    if requested is not None and requested > model.max_output_tokens:
        raise InvalidRequest(f"'{param}' is {requested}, but the model `{model.id}` produces at most "
                             f"{model.max_output_tokens} output tokens.", param=param)
