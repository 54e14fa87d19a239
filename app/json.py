"""JSON on the wire: msgspec straight to and from bytes, money as exact JSON numbers."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

T = TypeVar("T")

#: ``Decimal`` amounts are written as JSON numbers with every digit (never floats, never strings).
encode = msgspec.json.Encoder(decimal_format="number").encode
decode = msgspec.json.decode


def object_or(value: object, default: T) -> dict[str, Any] | T:
    """``value`` if it is a JSON object, else ``default``: how a field of an upstream's answer (or of a
    body only counted, never refused) is read, leniently, with its type known to the checker."""
    return value if isinstance(value, dict) else default
