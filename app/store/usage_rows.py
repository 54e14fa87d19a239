"""The usage rows: one record each for ``usage_daily`` and ``usage_by_attribution``, whose fields are
the table's columns, in order.

Each is its table's only declaration, as :class:`~app.store.entry_rows.EntryRow` is the audit
history's: the schema declares the table from it (``app/store/schema.py``), the history projection
makes one of each charge (``projections/history_rows.py``, ``projections/attribution.py``) and writes
its fields in this order, and ``ledger verify`` reads the stored rows back as records and compares
them with the sums of the replayed charges. A row is a key (its first :data:`KEY_WIDTH` fields) and
what is summed under it (:data:`SUMMED`, the same six counts in both tables).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Self, TypeVar

import msgspec
from msgspec.structs import astuple, replace

from app.store.storable import storable_record

#: How many of a usage row's first fields are its key (the table's primary key); the rest are summed.
KEY_WIDTH = 4


class _Summed(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What the two usage rows share: a key of :data:`KEY_WIDTH` fields, then the counts summed under it."""

    def values(self) -> tuple[Any, ...]:
        """The row's values, in the order of its table's columns."""
        return astuple(self)

    def key(self) -> tuple[str, ...]:
        return tuple(self.values()[:KEY_WIDTH])

    def counts(self) -> tuple[int, ...]:
        return tuple(self.values()[KEY_WIDTH:])

    def storable(self) -> Self:
        """The row as it is stored (``app/store/storable.py``); :class:`~app.store.storable.Unstorable`
        if a number does not fit."""
        return storable_record(self)

    @classmethod
    def read(cls, stored: Mapping[str, Any]) -> Self:
        """A stored row (a database's row by column name), its counts as integers (a database may
        hand back a sum as another kind of number)."""
        fields = cls.__struct_fields__
        return cls(
            **{f: stored[f] for f in fields[:KEY_WIDTH]},
            **{f: int(stored[f] or 0) for f in fields[KEY_WIDTH:]},
        )


class UsageRow(_Summed, frozen=True, kw_only=True, gc=False):
    """A charge's increment of ``usage_daily`` (team × key × model × day), or their sum."""

    team_name: str
    key_id: str
    model: str
    day: str  # the charge's UTC day, ISO 8601
    requests: int
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int  # every cache write, of whichever lifetime
    cache_hit_tokens: int
    cost: int  # micro-credits


class AttributionRow(_Summed, frozen=True, kw_only=True, gc=False):
    """A charge's increment of ``usage_by_attribution`` under one of its dimensions (``user``: its
    end user, ``""`` for none; ``tag:<name>``: that tag's value), or their sum."""

    team_name: str
    dimension: str
    value: str
    day: str  # the charge's UTC day, ISO 8601
    requests: int
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_hit_tokens: int
    cost: int  # micro-credits

    def under(self, value: str) -> AttributionRow:
        """The same counts under another value (``domain/attribution_bounds.py``: a value beyond the
        day's bounds is counted under ``OTHER``)."""
        return replace(self, value=value)


R = TypeVar("R", bound=_Summed)

#: The columns of ``usage_daily`` and of ``usage_by_attribution``, in order: their records' fields.
USAGE_COLUMNS: tuple[str, ...] = UsageRow.__struct_fields__
ATTRIBUTION_COLUMNS: tuple[str, ...] = AttributionRow.__struct_fields__
#: What both tables sum under a key.
SUMMED: tuple[str, ...] = USAGE_COLUMNS[KEY_WIDTH:]


def summed(rows: Iterable[R]) -> list[R]:
    """Rows with the same key added up into one, in the order each key first came (a statement may
    not upsert a row twice)."""
    totals: dict[tuple[str, ...], R] = {}
    add_into(totals, rows)
    return list(totals.values())


def add_into(totals: dict[tuple[str, ...], R], rows: Iterable[R]) -> None:
    """Add ``rows`` into ``totals``, by their key."""
    for row in rows:
        key = row.key()
        total = totals.get(key)
        totals[key] = row if total is None else _plus(total, row)


def _plus(total: R, row: R) -> R:
    return replace(total, **{f: a + b for f, a, b in zip(SUMMED, total.counts(), row.counts(), strict=True)})
