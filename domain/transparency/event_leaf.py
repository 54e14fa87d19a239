"""The canonical bytes of a ledger event as a leaf of the log, so that anyone can recompute its hash.

A leaf is one line of canonical JSON (UTF-8, no whitespace, no trailing newline) of the object::

    {"data":{...},"format":"tollgate-event/1","instant":"2025-01-31T12:00:00.000000Z",
     "team":"acme","type":"TeamLedger.Charged","version":7}

``data`` is the event's stored fields. Canonical JSON here is RFC 8785's (JCS) for the values a ledger
event holds, and refuses the rest rather than guess:

- object keys are strings, sorted by their UTF-16 code units (as RFC 8785; for keys within the Basic
  Multilingual Plane this is code point order), each written once;
- strings are written as themselves in UTF-8 except ``"`` → ``\\"``, ``\\`` → ``\\\\``, the short escapes
  ``\\b \\f \\n \\r \\t``, and every other character below U+0020 as ``\\u00xx`` (lowercase hex); NUL is
  ``\\u0000``; no Unicode normalization is applied (the bytes are the text as stored);
- a string holding a lone surrogate (U+D800–U+DFFF: not Unicode text, and not encodable as UTF-8) is
  refused, as RFC 8785 requires;
- integers are plain decimal (``-`` and digits, no leading zero) in the signed 64-bit range; money is
  always an integer number of micro-credits. Beyond RFC 8785 (whose numbers are IEEE doubles), an
  integer above 2^53 is exact here: a reimplementation must not parse them as floating point;
- floats (and ``Decimal``) are refused: an exact amount is stored as a string, never as a float;
- ``true``, ``false``, ``null`` and arrays as JSON writes them; nesting is limited to 32 levels.

The instant is the event's timestamp in UTC with exactly six fractional digits and a ``Z``; an
instant without a time zone is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

#: The format tag every leaf carries: a later encoding gets a new tag, and old leaves keep theirs.
LEAF_FORMAT = "tollgate-event/1"
_INT64 = (-(1 << 63), (1 << 63) - 1)
_MAX_DEPTH = 32
_ESCAPE = re.compile(r'["\\\x00-\x1f]')
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SURROGATE = re.compile(r"[\ud800-\udfff]")
#: A character beyond the Basic Multilingual Plane, in UTF-8: the lead byte of a four-byte sequence.
_ASTRAL_UTF8 = re.compile(rb"[\xf0-\xf4]")
#: Sorted keys, no whitespace, UTF-8 unescaped, the short escapes and ``\u00xx`` (lowercase) for the
#: other control characters: what the rules above say, for keys within the Basic Multilingual Plane.
_SORTED = msgspec.json.Encoder(order="sorted")


class LeafEncodingError(ValueError):
    """A value the canonical leaf encoding does not represent (a float, a lone surrogate, …)."""


def _string(text: str) -> str:
    if _SURROGATE.search(text):
        raise LeafEncodingError(f"a string holds a lone surrogate: {text!r}")
    return '"' + _ESCAPE.sub(lambda match: _SHORT.get(match[0]) or f"\\u{ord(match[0]):04x}", text) + '"'


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be")


def _encode(value: Any, depth: int) -> str:
    if depth > _MAX_DEPTH:
        raise LeafEncodingError(f"nested deeper than {_MAX_DEPTH} levels")
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise LeafEncodingError(f"an integer beyond 64 bits: {value}")
        return str(int(value))
    if isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise LeafEncodingError("an object key that is not a string")
        for key in value:
            _string(key)  # a key with a lone surrogate is refused before it is sorted
        items = sorted(value.items(), key=lambda item: _utf16_key(item[0]))
        return "{" + ",".join(f"{_string(key)}:{_encode(item, depth + 1)}" for key, item in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_encode(item, depth + 1) for item in value) + "]"
    raise LeafEncodingError(f"no canonical encoding for a {type(value).__name__}: {value!r}")


def _plain(value: Any, depth: int) -> bool:
    """Whether ``value`` is made only of what the fast encoder writes exactly as the rules above say:
    ``str`` keys, strings, integers in range, booleans, ``None``, lists and tuples, nested at most 32
    deep. Anything else goes to the exact encoder, which writes or refuses it. (Written as loops that
    look at a scalar member where it is: a call a member was most of a leaf's cost.)"""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(_INT64[0] <= value <= _INT64[1])
    if depth >= _MAX_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():  # noqa: SIM110 - a loop, not all() of a generator: half the cost
            if type(key) is not str or not _plain_member(item, depth):
                return False
        return True
    if kind is list or kind is tuple:
        for item in value:  # noqa: SIM110 - as above
            if not _plain_member(item, depth):
                return False
        return True
    return False


def _plain_member(item: Any, depth: int) -> bool:
    """``_plain`` of a container's member (the container at ``depth``), scalars decided here."""
    kind = type(item)
    if kind is str or kind is bool or item is None:
        return True
    if kind is int:
        return bool(_INT64[0] <= item <= _INT64[1])
    return _plain(item, depth + 1)


def canonical_json(value: Any) -> bytes:
    """``value`` as canonical JSON bytes (the rules above), or :class:`LeafEncodingError`.

    The usual case is msgspec's encoder with sorted keys (a tenth of the standard library's cost,
    the same bytes), which writes strings, numbers and escapes as the rules do; its keys are sorted by
    code point, which is UTF-16 order unless a character beyond the Basic Multilingual Plane is
    present. When one is (or a value is not plain), the exact encoder writes it. Both give the same
    bytes: the tests hold them to it, and to the standard library's ``json.dumps``."""
    if _plain(value, 0):
        try:
            encoded = _SORTED.encode(value)
        except UnicodeEncodeError:
            raise LeafEncodingError("a string holds a lone surrogate") from None
        if encoded.isascii() or not _ASTRAL_UTF8.search(encoded):
            return encoded
    return _encode(value, 0).encode("utf-8")


def canonical_instant(instant: datetime) -> str:
    """An aware instant in UTC, ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise LeafEncodingError(f"an instant without a time zone: {instant.isoformat()}")
    utc = instant.astimezone(UTC)
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
        f".{utc.microsecond:06d}Z"
    )


def event_leaf(team: str, version: int, type_name: str, instant: datetime, data: Mapping[str, Any]) -> bytes:
    """The leaf bytes of the event number ``version`` of ``team``'s ledger, of type ``type_name``, recorded
    at ``instant``, with stored fields ``data``. Its leaf hash is ``domain.transparency.hashing.leaf_hash``
    of these bytes."""
    if not team or not type_name:
        raise LeafEncodingError("an event leaf needs a team and a type")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise LeafEncodingError(f"an event's version is a positive integer, not {version!r}")
    envelope = {
        "data": data,
        "format": LEAF_FORMAT,
        "instant": canonical_instant(instant),
        "team": team,
        "type": type_name,
        "version": version,
    }
    return canonical_json(envelope)
