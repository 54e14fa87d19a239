"""The alert outbox's row: one record whose fields are the columns of ``alerts``, in order.

It is the table's only declaration, as :class:`~app.store.entry_rows.EntryRow` is the audit
history's: the schema declares the table from it (``app/store/schema.py``: a field's default the
column's server default), and the history projection makes one of each ``AlertRaised`` event
(``projections/alerts.py``) and writes its fields in this order.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec.structs import astuple

from app.store.storable import storable_record


class AlertRow(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An alert the ledger recorded (amounts in micro-credits)."""

    alert_id: str
    notification_id: int  # its event's position in the notification log: the outbox's order
    team_name: str
    key_id: str = ""  # the key whose budget it is about (``""``: the team's)
    kind: str
    threshold: str
    value: int
    budget_limit: int = 0  # ``0``: none
    period: str = ""
    request_id: str = ""  # the charge that crossed the threshold
    occurred_at: str  # ISO 8601

    def values(self) -> tuple[Any, ...]:
        """The row's values, in the order of the columns (as an INSERT of :data:`ALERT_COLUMNS` takes them)."""
        return astuple(self)

    def storable(self) -> AlertRow:
        """The row as it is stored (``app/store/storable.py``)."""
        return storable_record(self)


#: The columns of ``alerts``, in order: the fields of :class:`AlertRow`.
ALERT_COLUMNS: tuple[str, ...] = AlertRow.__struct_fields__
