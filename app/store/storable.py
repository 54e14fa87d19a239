"""What a database can store of a value: exactly what it holds, but for what no database can store.

A property of the databases (both of them), so it sits with the store: the projections' rows pass
through it, and so do the request records (``app/store/request_records.py``), which hold text a
client sent.

Text a client sends is checked where it enters (``domain/client_text.py``), but events recorded
before that rule may hold anything a JSON string can: one end user holding NUL once stopped the
audit history projection on PostgreSQL, for every team, for good. So every row the history
projection makes of an event (its audit history row, its usage, its attribution, its alert) passes
through :func:`storable_row`, the one rule, the same on both databases:

- a character a database cannot store in text — U+0000 (PostgreSQL's text cannot hold it) and a
  lone surrogate U+D800–U+DFFF (not encodable as UTF-8, so neither database can) — is stored as
  U+FFFD, the replacement character; nothing else in the text changes;
- a number that does not fit a 64-bit integer column cannot be stored at all: the row is refused
  with :class:`Unstorable`, and its event is quarantined (``projections/quarantine.py``) rather
  than stored as some other number.

The rule depends on the event alone, so the live projection, ``ledger rebuild`` and ``ledger
verify`` (which computes the rows it expects with the same functions) make and compare the very same
rows. The events themselves are never changed (the event store keeps their exact text); only their
rows in the read models are made storable.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec
from msgspec.structs import astuple, replace

#: What replaces a character no database can store.
REPLACEMENT = "\ufffd"
#: A 64-bit integer column's bounds.
LARGEST = 2**63 - 1
SMALLEST = -(2**63)

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

R = TypeVar("R", bound=msgspec.Struct)


class Unstorable(ValueError):
    """A row of an event that no database column can hold (a number beyond 64 bits)."""


def storable_text(text: str) -> str:
    """``text`` with each character no database can store replaced by U+FFFD."""
    return _UNSTORABLE.sub(REPLACEMENT, text) if _UNSTORABLE.search(text) else text


def storable_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """``row`` as it is stored: the same tuple when it holds nothing unstorable (the usual case,
    checked in one scan of its text), else its text made storable; :class:`Unstorable` if a number
    does not fit."""
    for value in row:
        if type(value) is int and not SMALLEST <= value <= LARGEST:
            raise Unstorable(f"the number {value} does not fit a 64-bit integer column")
    if not _UNSTORABLE.search("".join(v for v in row if type(v) is str)):
        return row
    return tuple(storable_text(v) if type(v) is str else v for v in row)


def storable_record(record: R) -> R:
    """A row record (its fields its table's columns) as it is stored: :func:`storable_row` of its
    values, so the very record when it holds nothing a database cannot store."""
    values = astuple(record)
    stored = storable_row(values)
    if stored is values:
        return record
    changed = zip(record.__struct_fields__, stored, values, strict=True)
    return replace(record, **{column: value for column, value, was in changed if value is not was})
