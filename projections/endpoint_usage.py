"""Usage by endpoint: charges by team × endpoint × day, in ``usage_by_endpoint``.

The dashboard shows each team's spend by endpoint (chat completions, embeddings, images, audio,
batches…). Summing the team's charge entries for it on every load would cost as much as its whole
history (a team may have millions); this table keeps the sums instead, so a read costs days ×
endpoints rows, whatever the number of requests. A batch's line charges count under the endpoint
their ``Charged`` event names (``batches``).

Written by the history projection (``projections/history.py``) in the transaction of the audit
history rows and the position, on catch-up and on rebuild alike; checked by ``ledger verify``
(``projections/audit_history.py``) against the sums of the replayed charges; filled, when it came
(migration 0017), from the audit history already projected.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.store.database import Sql, Transaction
from app.store.storable import storable_row
from domain.ledger import TeamLedger

TABLE = "usage_by_endpoint"
#: The key of a row, then what it sums.
KEY = ("team_name", "endpoint", "day")
SUMMED = ("requests", "input_tokens", "output_tokens", "cache_write_tokens", "cache_hit_tokens", "cost")
COLUMNS = (*KEY, *SUMMED)
_ADD = f"INSERT INTO {TABLE} ({', '.join(COLUMNS)})"
_ON_CONFLICT = f"ON CONFLICT ({', '.join(KEY)}) DO UPDATE SET " + ", ".join(
    f"{c} = {TABLE}.{c} + excluded.{c}" for c in SUMMED
)

Counts = list[int]


def endpoint_row(team_name: str, event: object) -> tuple[Any, ...] | None:
    """A charge's increment of its endpoint's day, as it is stored (``app/store/storable.py``); None
    for any other event. Its figures are its audit history row's: the two always sum alike."""
    if not isinstance(event, TeamLedger.Charged):
        return None
    u = event.usage
    return storable_row(
        (
            team_name,
            event.endpoint,
            event.timestamp.date().isoformat(),
            1,
            u["input_tokens"],
            u["output_tokens"],
            int(u["cache_write_tokens"]) + int(u.get("cache_write_1h_tokens", 0)),
            u["cache_hit_tokens"],
            event.charged,
        )
    )


def add_rows(totals: dict[tuple[Any, ...], Counts], rows: Sequence[tuple[Any, ...]]) -> None:
    """Add ``rows`` into ``totals``, by their key."""
    width = len(KEY)
    for row in rows:
        key = row[:width]
        summed = totals.get(key)
        if summed is None:
            totals[key] = list(row[width:])
        else:
            for i, value in enumerate(row[width:]):
                summed[i] += value


def write(tx: Transaction, rows: Sequence[tuple[Any, ...]]) -> None:
    """Add a slice's rows to the table, summed first (a statement may not upsert a row twice)."""
    totals: dict[tuple[Any, ...], Counts] = {}
    add_rows(totals, rows)
    tx.insert_many(_ADD, [(*k, *v) for k, v in totals.items()], _ON_CONFLICT)


def rows_from_entries(upto: int) -> tuple[str, list[Any]]:
    """The query (``?`` markers) that fills the table from the audit history's charges up to event
    ``upto``: what the projection wrote for them (``scripts/ledger_scale/setback.py`` puts a history
    back with it). A whole-history read: never on a request's or a page's path."""
    day = "substr(occurred_at, 1, 10)"
    query = (
        f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) "
        f"SELECT team_name, endpoint, {day}, COUNT(*), SUM(input_tokens), SUM(output_tokens), "
        "SUM(cache_write_tokens), SUM(cache_hit_tokens), -SUM(amount) FROM ledger_entries "
        f"WHERE kind = 'charge' AND notification_id <= ? GROUP BY team_name, endpoint, {day}"
    )
    return query, [upto]


def by_endpoint(sql: Sql, team: str) -> list[dict[str, Any]]:
    """The team's usage by endpoint over all its days, the largest cost first (then by name): one
    row per endpoint it was charged on, summed from its days' rows (through the key's first column)."""
    sums = ", ".join(f"SUM({c}) AS {c}" for c in SUMMED)
    return sql.query(
        f"SELECT endpoint, {sums} FROM {TABLE} WHERE team_name = ? GROUP BY endpoint ORDER BY cost DESC, endpoint",
        [team],
    )


def everything(sql: Sql) -> list[tuple[Any, ...]]:
    """Every row (for ``ledger verify``: as many as team × endpoint × day)."""
    return sql.tuples(f"SELECT {', '.join(COLUMNS)} FROM {TABLE}", [])
