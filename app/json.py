"""JSON on the wire: msgspec straight to and from bytes, money as exact JSON numbers."""

from __future__ import annotations

import msgspec

#: ``Decimal`` amounts are written as JSON numbers with every digit (never floats, never strings).
encode = msgspec.json.Encoder(decimal_format="number").encode
decode = msgspec.json.decode
