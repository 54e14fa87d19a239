"""The audit history's row: one record whose fields are the columns of ``ledger_entries``.

It is the table's only declaration. The history projection makes one of each event that has a row
(``projections/history_rows.py``) and writes its fields in this order; the schema declares the table
from it (``app/store/schema.py``: an ``int`` field a 64-bit integer column, a ``str`` a text one,
a field's default the column's server default); the export's header is its field names; and
``ledger verify`` compares each stored row with the row its event makes, field by field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

import msgspec
from msgspec.structs import astuple

from app.store.storable import storable_record


class EntryRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One entry of the audit history: a top-up, an adjustment, a charge, or an operator's action
    that moves no money (amounts in micro-credits)."""

    notification_id: int  # the event's position in the notification log: the history's order
    team_id: str  # the team's id, in hex
    team_name: str
    version: int  # the event's version in its team
    occurred_at: str  # when, ISO 8601
    kind: str  # top_up, adjustment, charge, or the operator's action (``projections/operator_rows.py``)
    key_id: str = ""
    request_id: str = ""
    endpoint: str = ""
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0  # every cache write, of whichever lifetime
    cache_hit_tokens: int = 0
    price: str = ""  # the rates a charge was billed at, and why (``history_rows.price_text``)
    amount: int  # what the balance moved by (a charge: minus what was debited)
    cost_usd: str = "0"
    balance_after: int  # the team's balance after it (an action that moves no money: as it stood)
    reference: str = ""  # a top-up's reference, an adjustment's reason, what an action set
    #: The charge's attribution: its tags (canonical ``name=value,...``) and end user (``""``: none).
    tags: str = ""
    end_user: str = ""
    #: Who caused an operator's entry (``admin:<key id>``, ``admin:config``, ``cli:user@host``), and why.
    actor: str = ""
    reason: str = ""

    def values(self) -> tuple[object, ...]:
        """The row's values, in the order of the columns (as an INSERT of :data:`ENTRY_COLUMNS` takes them)."""
        return astuple(self)

    def storable(self) -> EntryRow:
        """The row as it is stored (``app/store/storable.py``): this very row when it holds nothing
        a database cannot store; :class:`~app.store.storable.Unstorable` if a number does not fit."""
        return storable_record(self)

    def difference(self, stored: Sequence[object]) -> str | None:
        """Where the ``stored`` row (its columns in order) differs from this one, said; None if it
        holds the same. A value equal as text is the same: a database may hand back a number it kept
        in a text column as text, or text it kept in a number column as a number."""
        for column, mine, theirs in zip(ENTRY_COLUMNS, self.values(), stored, strict=True):
            if mine != theirs and str(mine) != str(theirs):
                return f"its {column} is {theirs!r}, its event's is {mine!r}"
        return None


class EntryHead(TypedDict):
    """The columns every entry fills alike, from its event and its team."""

    notification_id: int
    team_id: str
    team_name: str
    version: int
    occurred_at: str


#: The columns of ``ledger_entries``, in order: the fields of :class:`EntryRow`.
ENTRY_COLUMNS: tuple[str, ...] = EntryRow.__struct_fields__
#: Where a stored row (its columns in order) has its notification id: the history's keyset order.
NOTIFICATION_ID = ENTRY_COLUMNS.index("notification_id")
