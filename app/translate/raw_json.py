"""Small exact edits of a JSON object's bytes, so that an upstream's event can be relayed as it came.

A relayed event differs from the upstream's in one or two top-level members (the model's name; a
``"usage": null``). Decoding the whole event and encoding it again to change them costs more than
everything else the relay does with it; finding the member's bytes and replacing them costs a
substring search. The text found may be another member's (the same text nested deeper, or a key
that ends in an escaped quote), so every splice is checked: the result is decoded for its top-level
``model`` and ``usage`` alone (a decoder that skips everything else), and must hold what was meant —
which it can only if the text replaced was the top-level member's. Anything else — a member written
in a form the search does not know, a ``"usage": null`` that occurs twice — is left to the caller to
rewrite whole (``splice`` answers None).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal

import msgspec
from msgspec import UnsetType

from app.json import encode

UNSET = msgspec.UNSET


class _Top(msgspec.Struct):
    model: Any = UNSET
    usage: Any = UNSET


_check = msgspec.json.Decoder(_Top).decode
_NULL_USAGES = (b'"usage":null', b'"usage": null')
#: A ``usage`` member, null, after another member.
_NULL_USAGE = b',"usage":null'
_WHITESPACE = b" \t\r\n"


def _one(data: bytes, forms: tuple[bytes, ...]) -> tuple[int, bytes] | None:
    """Where the one occurrence of any of ``forms`` is, and which form; None unless exactly one."""
    found = None
    for form in forms:
        count = data.count(form)
        if count > 1 or (count and found is not None):
            return None
        if count:
            found = (data.index(form), form)
    return found


class Splicer:
    """Puts ``model_id`` in place of the upstream's model name in JSON objects' bytes."""

    __slots__ = ("_forms", "_member", "_model_id")

    def __init__(self, model_id: str) -> None:
        self._model_id = model_id
        self._member = b'"model":' + encode(model_id)
        self._forms: dict[str, tuple[bytes, ...]] = {}

    def forms(self, model: str) -> tuple[bytes, bytes]:
        """The text of a ``model`` member naming ``model`` as a compact encoder writes it, and the
        member naming the client's model instead."""
        forms = self._forms.get(model)
        if forms is None:
            value = encode(model)
            forms = self._forms[model] = (b'"model":' + value, b'"model": ' + value)
        return forms[0], self._member

    def splice(self, data: bytes, model: Any, usage: Any, wanted_usage: Any) -> bytes | None:
        """``data`` (a JSON object whose top-level ``model`` is ``model`` and ``usage`` is ``usage``:
        None, or ``msgspec.UNSET`` for none) with the client's model and with ``wanted_usage`` (None
        or UNSET): a ``"usage": null`` dropped or added; None if that cannot be done exactly."""
        if not isinstance(model, str):
            return None
        if model != self._model_id:
            self.forms(model)
            compact, spaced = self._forms[model]
            form = compact if compact in data else spaced if spaced in data else None
            if form is None:
                return None
            # The first occurrence; if it is not the top-level member, the check below finds the
            # top-level model unchanged.
            data = data.replace(form, self._member, 1)
        spliced: bytes | None = data
        if usage is None and wanted_usage is UNSET:
            spliced = _without_null_usage(data)
        elif usage is UNSET and wanted_usage is None:
            spliced = _with_null_usage(data)
        if spliced is None:
            return None
        try:
            top = _check(spliced)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            return None
        if top.model != self._model_id or top.usage is not wanted_usage:
            return None
        return spliced

    def splice_all(self, joined: bytes, count: int, model: Any, nulls: int, wanted_usage: Any) -> bytes | None:
        """``joined`` (``count`` JSON objects, each valid alone, joined by whitespace, each with the
        top-level ``model``; ``nulls`` of them with a ``"usage": null``) with the client's model in
        each, and ``wanted_usage`` (None: kept; UNSET: the nulls dropped); None unless the text
        replaced was exactly each object's top-level member (one each, and checked by one decode)."""
        if not isinstance(model, str):
            return None
        if model != self._model_id:
            form, member = self.forms(model)
            spliced = joined.replace(form, member)
            grown = len(member) - len(form)
            replaced = (len(spliced) - len(joined)) // grown if grown else joined.count(form)
            if replaced != count:
                return None  # not once per object: nested too, or in another form
            joined = spliced
        if wanted_usage is UNSET and nulls:
            spliced = joined.replace(_NULL_USAGE, b"")
            if len(joined) - len(spliced) != nulls * len(_NULL_USAGE):
                return None
            joined = spliced
        checks = _all_checks(self._model_id)
        try:
            held = len(checks[wanted_usage is None](joined)) == count
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            return None
        return joined if held else None


@functools.cache
def _all_checks(model_id: str) -> tuple[Callable[[bytes], list[Any]], Callable[[bytes], list[Any]]]:
    """Decoders of whitespace-separated objects whose top-level ``model`` is ``model_id`` and which
    have no ``usage`` (the first) or a null one (the second); any other object fails to decode.
    Made once per model id (a process serves a handful)."""
    model = ("model", Literal[model_id])
    without = msgspec.defstruct("WithoutUsage", [model, ("usage", UnsetType, UNSET)])
    null = msgspec.defstruct("NullUsage", [model, ("usage", None)])
    return msgspec.json.Decoder(without).decode_lines, msgspec.json.Decoder(null).decode_lines


def _without_null_usage(data: bytes) -> bytes | None:
    found = _one(data, _NULL_USAGES)
    if found is None:
        return None
    at, form = found
    end = at + len(form)
    before = data[:at].rstrip(_WHITESPACE)
    if before.endswith(b","):  # a member after another: its comma goes with it
        return before[:-1] + data[end:]
    after = data[end:].lstrip(_WHITESPACE)
    if after.startswith(b","):  # the first member
        return data[:at] + after[1:]
    return data[:at] + data[end:]  # the only member


def _with_null_usage(data: bytes) -> bytes | None:
    body = data.rstrip(_WHITESPACE)
    if not body.endswith(b"}"):
        return None
    inside = body[:-1].rstrip(_WHITESPACE)
    return inside + (b'"usage":null}' if inside.endswith(b"{") else b',"usage":null}')
