"""Stripe's request encoding, read back: ``application/x-www-form-urlencoded`` with brackets for nesting.

The official libraries send every parameter this way, in POST bodies and GET query strings alike
(``stripe/_encode.py``: ``_api_encode``): ``metadata[team]=acme``, ``line_items[0][price_data][currency]=usd``,
``created[gte]=1700000000``, booleans as ``true``/``false``, arrays always indexed (``expand[0]=customer``;
``expand[]=customer``, which curl users write, means the same). :func:`decode` turns such a body into
the nested dicts and lists it stands for; every leaf stays the string that was sent, as Stripe reads
it, and :class:`Params` reads each one as the type the endpoint expects, refusing it with Stripe's own
``invalid_request_error`` when it is not.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl

_PART = re.compile(r"\[([^\[\]]*)\]")


class FormError(Exception):
    """A parameter Stripe would refuse: its ``invalid_request_error``, with the code and param it names."""

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message, self.param, self.code = message, param, code


def _path(key: str) -> list[str]:
    """``a[b][0]`` → ``["a", "b", "0"]`` (a key without brackets is one part)."""
    head, bracket, _ = key.partition("[")
    if not bracket:
        return [key]
    rest = key[len(head) :]
    parts = _PART.findall(rest)
    if "".join(f"[{p}]" for p in parts) != rest:  # a stray bracket: the whole key is a name of its own
        return [key]
    return [head, *parts]


def _listify(node: Any) -> Any:
    """Dicts keyed ``0, 1, …`` (or appended with ``[]``) become lists, in index order."""
    if not isinstance(node, dict):
        return node
    node = {k: _listify(v) for k, v in node.items()}
    if node and all(isinstance(k, int) for k in node):
        return [node[k] for k in sorted(node)]
    return node


def decode(body: str) -> dict[str, Any]:
    """The parameters a form-encoded body (or query string) carries, nested as the brackets say."""
    root: dict[Any, Any] = {}
    for key, value in parse_qsl(body, keep_blank_values=True):
        parts = _path(key)
        node = root
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            slot: Any = part
            if part == "" and i > 0:  # ``expand[]=x``: the next index
                slot = len(node)
            elif part.isdigit() and i > 0:
                slot = int(part)
            if last:
                node[slot] = value
            else:
                child = node.get(slot)
                if not isinstance(child, dict):
                    child = node[slot] = {}
                node = child
    decoded = _listify(root)
    return decoded if isinstance(decoded, dict) else {}


class Params:
    """One endpoint's parameters, read as it expects them; what it does not know is refused."""

    def __init__(self, values: dict[str, Any], known: set[str], prefix: str = "") -> None:
        self.values, self.prefix = values, prefix
        for name in values:
            if name not in known:
                raise FormError(
                    f"Received unknown parameter: {self.name(name)}", param=self.name(name), code="parameter_unknown"
                )

    def name(self, key: str) -> str:
        """The parameter's name as Stripe spells it in errors: ``line_items[0][quantity]``."""
        return f"{self.prefix}[{key}]" if self.prefix else key

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def text(self, key: str, *, required: bool = False, choices: tuple[str, ...] = ()) -> str | None:
        value = self.values.get(key)
        if value is None:
            if required:
                raise FormError(
                    f"Missing required param: {self.name(key)}.", param=self.name(key), code="parameter_missing"
                )
            return None
        if not isinstance(value, str):
            raise FormError(f"Invalid string: {value!r}", param=self.name(key))
        if choices and value not in choices:
            listed = ", ".join(choices[:-1]) + f", or {choices[-1]}" if len(choices) > 1 else choices[0]
            raise FormError(f"Invalid {self.name(key)}: must be one of {listed}", param=self.name(key))
        return value

    def integer(self, key: str, *, required: bool = False) -> int | None:
        value = self.text(key, required=required)
        if value is None:
            return None
        if not re.fullmatch(r"-?\d+", value):
            raise FormError(f"Invalid integer: {value}", param=self.name(key), code="parameter_invalid_integer")
        return int(value)

    def boolean(self, key: str) -> bool:
        value = self.text(key)
        if value is None:
            return False
        if value not in ("true", "false"):
            raise FormError(f"Invalid boolean: {value}", param=self.name(key))
        return value == "true"

    def mapping(self, key: str, known: set[str] | None = None) -> Params | None:
        """A nested hash (``payment_intent_data[...]``), or None; ``known`` None accepts any key."""
        value = self.values.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise FormError(f"Invalid object: {self.name(key)}", param=self.name(key))
        return Params(value, set(value) if known is None else known, self.name(key))

    def items(self, key: str, known: set[str]) -> list[Params]:
        """An array of hashes (``line_items[0][...]``)."""
        value = self.values.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise FormError(f"Invalid array: {self.name(key)}", param=self.name(key))
        return [Params(v, known, f"{self.name(key)}[{i}]") for i, v in enumerate(value)]

    def strings(self, key: str) -> list[str]:
        value = self.values.get(key)
        if value is None:
            return []
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise FormError(f"Invalid array: {self.name(key)}", param=self.name(key))
        return value

    def metadata(self) -> dict[str, str]:
        """``metadata[...]``: string values, at most 50 keys of 40 characters, values of 500; an empty
        value unsets its key (on a new object: it is not set)."""
        found = self.mapping("metadata")
        if found is None:
            return {}
        values = found.values
        if len(values) > 50:
            raise FormError("Invalid metadata: metadata may have at most 50 keys", param="metadata")
        out: dict[str, str] = {}
        for key, value in values.items():
            if not isinstance(value, str):
                raise FormError(f"Invalid string: {value!r}", param=found.name(str(key)))
            if len(str(key)) > 40:
                raise FormError(f"Invalid metadata key: {key} is longer than 40 characters", param=found.name(str(key)))
            if len(value) > 500:
                raise FormError("Invalid metadata value: longer than 500 characters", param=found.name(str(key)))
            if value:
                out[str(key)] = value
        return out
