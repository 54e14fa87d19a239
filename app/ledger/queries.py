"""Reading a team's audit history and usage: one place for the admin API, the dashboard and the CLI.

The history projection (``projections/history.py``) is fed by each gateway's projector every couple
of seconds, so every read here catches it up first: a charge answered a moment ago is in the answer.
Racing the projector is safe, the projection applies each event exactly once. These functions block
(they query the database); request handlers run them with ``asyncio.to_thread``.

The export (CSV or JSON Lines of every entry: the ``ENTRY_COLUMNS`` in order, amounts in
micro-credits as the ledger stores them, then ``leaf``, the index of the entry's event in the
transparency log, so each line can be proven in it: ``GET /ledger/proof/inclusion``) is written by
:func:`write_export` for both ``tollgate ledger export`` and the dashboard's download, so the two can
never disagree; both read it a page at a time (:func:`export_chunks`), so its memory does not grow
with the history.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import date, timedelta
from typing import Any, TextIO

from msgspec.structs import asdict

from app.spreadsheet_csv import CsvWriter
from app.store.event_store import LedgerStore
from app.store.usage_rows import SUMMED
from domain.attribution_bounds import OTHER
from domain.endpoints import ENDPOINT_LABELS, ENDPOINT_PATHS
from domain.money import credits_from_micros
from projections.history import ENTRY_PAGE, HistoryProjection, entry_page_sql
from projections.history_rows import ENTRY_COLUMNS

EXPORT_FORMATS = ("csv", "jsonl")
#: Values a page of usage by attribution holds unless asked otherwise, and at most.
USAGE_PER_PAGE = 100
MAX_USAGE_PER_PAGE = 1000


@contextmanager
def caught_up(store: LedgerStore) -> Iterator[HistoryProjection]:
    """The history projection with every stored event applied, closed afterwards."""
    history = HistoryProjection(store, store.database)
    try:
        history.catch_up()
        yield history
    finally:
        history.close()


def history_page(
    store: LedgerStore, team: str, page: int, per_page: int, since: str | None = None, newest_first: bool = False
) -> dict[str, Any]:
    """One page of the team's ledger entries in ledger order (or newest first), as the rows are
    stored (amounts in micro-credits)."""
    with caught_up(store) as history:
        total = history.count(team=team, since=since)
        rows = history.entries(
            team=team, since=since, limit=per_page, offset=(page - 1) * per_page, newest_first=newest_first
        )
    return {
        "object": "list",
        "data": rows,
        "page": page,
        "per_page": per_page,
        "total": total,
        "has_more": page * per_page < total,
    }


def usage(store: LedgerStore, team: str) -> dict[str, Any]:
    """Usage by key × model × day, and totals by model and by endpoint (each named, labelled for
    people, and its path); costs in exact credits."""
    with caught_up(store) as history:
        rows = history.usage(team=team)
        endpoint_rows = history.endpoint_usage(team)
    by_model: dict[str, dict[str, Any]] = {}
    for r in rows:
        total = by_model.setdefault(r.model, {"model": r.model, **dict.fromkeys(SUMMED, 0)})
        for field, value in zip(SUMMED, r.counts(), strict=True):
            total[field] += value
    for total in by_model.values():
        total["cost"] = credits_from_micros(total["cost"])
    daily = [{**asdict(r), "cost": credits_from_micros(r.cost)} for r in rows]
    by_endpoint = [
        {
            **{field: int(r[field] or 0) for field in SUMMED},
            "endpoint": r["endpoint"],
            "label": ENDPOINT_LABELS.get(r["endpoint"], r["endpoint"] or "Unknown"),
            "path": ENDPOINT_PATHS.get(r["endpoint"], ""),
            "cost": credits_from_micros(int(r["cost"] or 0)),
        }
        for r in endpoint_rows
    ]
    return {"team": team, "by_model": list(by_model.values()), "by_endpoint": by_endpoint, "daily": daily}


def usage_by(
    store: LedgerStore,
    team: str,
    dimension: str,
    since: str | None = None,
    page: int = 1,
    per_page: int = USAGE_PER_PAGE,
) -> dict[str, Any]:
    """Usage by the values of ``dimension`` (``user`` or ``tag:<name>``), from the day ``since`` on,
    a page of ``per_page`` values at a time, the largest cost first: every charge of the team under
    exactly one value (``""`` for charges without it, ``None`` for those beyond the day's bounds:
    ``domain/attribution_bounds.py``), so the values' costs add up to the team's charges (``total``);
    costs in exact credits, and in micro-credits. ``dimensions``: those the team's usage can be
    reported by."""
    with caught_up(store) as history:
        found = history.attribution_usage(team, dimension, since, limit=per_page, offset=(page - 1) * per_page)
        dimensions = history.attribution_dimensions(team)
    data = [
        {
            **r,
            "value": None if r["value"] == OTHER else r["value"],
            "cost": credits_from_micros(r["cost"]),
            "cost_micros": r["cost"],
        }
        for r in found.rows
    ]
    total = found.total["cost"]
    return {
        "team": team,
        "by": dimension,
        "since": since,
        "dimensions": dimensions or ["user"],
        "data": data,
        "total": {"requests": found.total["requests"], "cost": credits_from_micros(total), "cost_micros": total},
        "page": page,
        "per_page": per_page,
        "values": found.values,
        "has_more": page * per_page < found.values,
    }


def key_spend(store: LedgerStore, team: str, key_id: str, today: date) -> dict[str, int]:
    """What a key has spent (micro-credits): in all, today, this week (from Monday) and this month,
    UTC calendar periods, from the usage projection (caught up first)."""
    week, month = today - timedelta(days=today.weekday()), today.replace(day=1)
    spent = {"total": 0, "daily": 0, "weekly": 0, "monthly": 0}
    with caught_up(store) as history:
        rows = history.key_usage(team, key_id)
    for row in rows:
        day, cost = date.fromisoformat(row["day"]), int(row["cost"])
        spent["total"] += cost
        spent["daily"] += cost if day == today else 0
        spent["weekly"] += cost if day >= week else 0
        spent["monthly"] += cost if day >= month else 0
    return spent


def latest_charges(store: LedgerStore, team: str, limit: int) -> list[dict[str, Any]]:
    """The team's last ``limit`` charges, newest first."""
    with caught_up(store) as history:
        return history.entries(team=team, kind="charge", limit=limit, newest_first=True)


def export_upto(store: LedgerStore) -> int:
    """Catch the history up, and return the event it reached: an export holds the entries up to it
    (those projected while it is read are the next export's)."""
    with caught_up(store) as history:
        return history.position()


def export_chunks(store: LedgerStore, team: str, fmt: str, upto: int, since: str | None = None) -> Iterator[str]:
    """The team's export up to event ``upto``, as text, one chunk per page of ``ENTRY_PAGE`` entries
    (a keyset query each, on the store's pooled connections, none held between pages): what the CLI
    writes to stdout and the dashboard streams, never the whole history at once. Empty, the CSV
    export is still its header line."""
    after, first = 0, True
    while True:
        sql, params = entry_page_sql(after, upto, team=team, since=since, columns=_EXPORTED, source=_WITH_LEAVES)
        rows = store.read_models.read_rows(sql.replace("?", "{p}"), tuple(params))
        if rows or first:
            out = io.StringIO()
            write_export(rows, fmt, out, header=first)
            first = False
            yield out.getvalue()
        if len(rows) < ENTRY_PAGE:
            return
        after = int(rows[-1]["notification_id"])


#: The export's columns: every entry's, then its event's leaf in the transparency log.
EXPORT_COLUMNS = (*ENTRY_COLUMNS, "leaf")
#: The entries with their events' leaves (an index on the leaves' events: one lookup a row).
_WITH_LEAVES = (
    "ledger_entries LEFT JOIN log_leaves ON log_leaves.originator_id = ledger_entries.team_id "
    "AND log_leaves.originator_version = ledger_entries.version"
)
_EXPORTED = "ledger_entries.*, log_leaves.leaf_index AS leaf"


def write_export(rows: Iterable[Mapping[str, Any]], fmt: str, out: TextIO, *, header: bool = True) -> None:
    """``rows`` as CSV (the header line, unless ``header`` is false, then one line per entry; text a
    spreadsheet would take for a formula marked as text: ``app/spreadsheet_csv.py``) or JSON Lines,
    ``EXPORT_COLUMNS`` in order (an entry whose event has no leaf: an empty cell, a JSON null)."""
    if fmt == "jsonl":
        out.writelines(json.dumps({c: row[c] for c in EXPORT_COLUMNS}) + "\n" for row in rows)
        return
    writer = CsvWriter(out)
    if header:
        writer.row(EXPORT_COLUMNS)
    writer.rows([row[c] for c in EXPORT_COLUMNS] for row in rows)


def recent_alerts(store: LedgerStore, team: str, limit: int = 50) -> list[dict[str, Any]]:
    """The team's latest alerts, newest first, each with its deliveries (amounts in micro-credits)."""
    with caught_up(store) as history:
        return history.outbox().recent(team, limit)


def recent_recharges(store: LedgerStore, team: str, limit: int = 10) -> list[dict[str, Any]]:
    """The team's latest auto-recharge attempts, newest first, with what became of each payment."""
    with caught_up(store) as history:
        return history.recharges().of_team(team, limit)


def credited_payments(store: LedgerStore, since: str) -> list[dict[str, Any]]:
    """Every team's top-ups since ``since`` (ISO 8601) that a payment credited (their reference a
    Stripe PaymentIntent), oldest first."""
    with caught_up(store) as history:
        return [row for row in history.entries(since=since, kind="top_up") if str(row["reference"]).startswith("pi_")]
