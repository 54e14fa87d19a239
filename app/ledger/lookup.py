"""Finding one request by its id: its charge in the ledger and its record as the gateway saw it.

The two halves come from different places, written at different times:

- the **charge** is the ledger's ``Charged`` event. Its row in ``charged_requests`` is written in the
  event's own transaction, before the answer's last byte, so a charged request is found the moment
  its client has the answer. The row (found by team and request id, the table's key) gives the
  event's version, and the event itself is read from the event store: every figure it recorded
  (usage by kind, the rates, tags, the balance after it), none re-derived.
- the **record** (``request_records``: status, timings, deployment, attempts) is written by each
  gateway process in batches, within a second of the answer (``app/observability/record_writer.py``).

A team's lookup knows its team, so both are single key probes. The admin's does not: the record names
the team, else the audit history's index on ``request_id`` does (that history trails the ledger by a
couple of seconds). These functions block; request handlers run them with ``asyncio.to_thread``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from app.store.database import Sql
from app.store.event_store import LedgerStore
from app.store.request_records import find_record
from domain.ledger import TeamLedger, team_id


@dataclass(frozen=True)
class FoundRequest:
    request_id: str
    team_name: str
    #: The ``request_records`` row (None: not written yet, or purged, or not kept).
    record: dict[str, Any] | None
    #: The ledger's charge of the request (None: not charged, or not yet).
    charge: TeamLedger.Charged | None


def find_request(store: LedgerStore, request_id: str, team_name: str | None = None) -> FoundRequest | None:
    """The request ``request_id`` — only if it is ``team_name``'s, when given — or None if nothing
    of it is known (an unknown id and another team's request look the same)."""
    sql = Sql(store.database)
    try:
        record = find_record(sql, request_id, team_name)
        name = team_name or (record["team_name"] if record is not None else _charged_team(sql, request_id))
    finally:
        sql.close()
    if name is None:
        return None
    charge = find_charge_event(store, team_id(name), request_id)
    if record is None and charge is None:
        return None
    return FoundRequest(request_id, name, record, charge)


def _charged_team(sql: Sql, request_id: str) -> str | None:
    rows = sql.query("SELECT team_name FROM ledger_entries WHERE request_id = ? AND kind = 'charge'", (request_id,))
    return str(rows[0]["team_name"]) if rows else None


def find_charge_event(store: LedgerStore, team: UUID, request_id: str) -> TeamLedger.Charged | None:
    """The team's ``Charged`` event of the request, read from the event store at its version."""
    found = store.find_charge(team, request_id)
    if found is None:
        return None
    stored = store.recorder.select_events(team, gt=found.version - 1, lte=found.version, limit=1)
    if not stored:
        return None
    event = store.mapper.to_domain_event(stored[0])
    return event if isinstance(event, TeamLedger.Charged) else None
