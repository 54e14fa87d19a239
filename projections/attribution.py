"""Usage by attribution: charges by team × dimension × value × day, in ``usage_by_attribution``.

Written by the history projection (``projections/history.py``) in the transaction of the audit
history rows and the position, on catch-up and on rebuild alike, and checked by ``ledger verify``
(``projections/audit_history.py``) against the replay. Each charge adds to its ``user`` row (its end
user, ``""`` if none) and to one row per tag it carries (``domain/attribution.py``: ``dimensions``).
So the ``user`` rows of a team add up to its charges, and a tag's ``""`` (charges without that tag)
is read as the team's total less the tag's rows: the values of any dimension sum to the team's
charges exactly, with no row for every tag a charge does not have.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domain.attribution import USER, dimensions
from domain.ledger import TeamLedger
from projections.database import Sql, Transaction
from projections.storable import storable_row

TABLE = "usage_by_attribution"
#: The key of a row, then what it sums.
KEY = ("team_name", "dimension", "value", "day")
SUMMED = ("requests", "input_tokens", "output_tokens", "cache_write_tokens", "cache_hit_tokens", "cost")
COLUMNS = (*KEY, *SUMMED)
_ADD = f"INSERT INTO {TABLE} ({', '.join(COLUMNS)})"
_ON_CONFLICT = (f"ON CONFLICT ({', '.join(KEY)}) DO UPDATE SET "
                + ", ".join(f"{c} = {TABLE}.{c} + excluded.{c}" for c in SUMMED))

Counts = list[int]


def attribution_rows(team_name: str, event: Any) -> list[tuple[Any, ...]]:
    """A charge's rows (its end user's, and one per tag); none for any other event."""
    if not isinstance(event, TeamLedger.Charged):
        return []
    u = event.usage
    day = event.timestamp.date().isoformat()
    counts = (1, u["input_tokens"], u["output_tokens"],
              int(u["cache_write_tokens"]) + int(u.get("cache_write_1h_tokens", 0)), u["cache_hit_tokens"],
              event.charged)
    return [storable_row((team_name, dimension, value, day, *counts))
            for dimension, value in dimensions(event.tags, event.end_user)]


def add_rows(totals: dict[tuple[Any, ...], Counts], rows: Sequence[tuple[Any, ...]]) -> None:
    """Add ``rows`` into ``totals``, by their key."""
    for row in rows:
        key = row[:len(KEY)]
        summed = totals.get(key)
        if summed is None:
            totals[key] = list(row[len(KEY):])
        else:
            for i, value in enumerate(row[len(KEY):]):
                summed[i] += value


def write(tx: Transaction, rows: Sequence[tuple[Any, ...]]) -> None:
    """Add a slice's rows to the table, summed first (a statement may not upsert a row twice)."""
    totals: dict[tuple[Any, ...], Counts] = {}
    add_rows(totals, rows)
    tx.insert_many(_ADD, [(*k, *v) for k, v in totals.items()], _ON_CONFLICT)


def everything(sql: Sql) -> list[tuple[Any, ...]]:
    """Every row (for ``ledger verify``: as many as team × dimension × value × day)."""
    return sql.tuples(f"SELECT {', '.join(COLUMNS)} FROM {TABLE}", [])


def dimensions_of(sql: Sql, team: str) -> list[str]:
    """The dimensions the team's charges were counted under: ``user``, then its tags' by name."""
    rows = sql.query(f"SELECT DISTINCT dimension FROM {TABLE} WHERE team_name = ?", [team])
    return sorted((r["dimension"] for r in rows), key=lambda d: (d != USER, d))


def breakdown(sql: Sql, team: str, dimension: str, since: str | None = None) -> list[dict[str, Any]]:
    """The team's usage by the values of ``dimension`` (summed over the days from ``since``, an ISO
    day), the largest cost first; a tag's charges without it under the value ``""``."""
    where, params = "team_name = ? AND dimension = ?", [team, dimension]
    if since:
        where += " AND day >= ?"
        params.append(since[:10])
    sums = ", ".join(f"SUM({c}) AS {c}" for c in SUMMED)
    rows = sql.query(f"SELECT value, {sums} FROM {TABLE} WHERE {where} GROUP BY value", params)
    found = {r["value"]: [int(r[c]) for c in SUMMED] for r in rows}
    if dimension != USER:
        params[1] = USER
        total = sql.query(f"SELECT {sums} FROM {TABLE} WHERE {where}", params)[0]
        untagged = [int(total[c] or 0) - sum(v[i] for v in found.values()) for i, c in enumerate(SUMMED)]
        if untagged[0]:  # a tag's value is never "" (``parse_tags``), so this row is the untagged charges alone
            found[""] = untagged
    answer = [{"value": value, **dict(zip(SUMMED, counts, strict=True))} for value, counts in found.items()]
    return sorted(answer, key=lambda r: (-r["cost"], -r["requests"], r["value"]))
