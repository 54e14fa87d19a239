"""Usage by attribution: charges by team × dimension × value × day, in ``usage_by_attribution``.

Written by the history projection (``projections/history.py``) in the transaction of the audit
history rows and the position, on catch-up and on rebuild alike, and checked by ``ledger verify``
(``projections/audit_history.py``) against the replay. Each charge adds to its ``user`` row (its end
user, ``""`` if none) and to one row per tag it carries (``domain/attribution.py``: ``dimensions``),
within the bounds of ``domain/attribution_bounds.py`` (per team and day, a bounded number of values
with rows of their own; the rest under ``OTHER``). So the ``user`` rows of a team add up to its
charges, and a tag's ``""`` (charges without that tag) is read as the team's total less the tag's
rows: the values of any dimension sum to the team's charges exactly, with no row for every tag a
charge does not have. A report reads them a page at a time (:func:`breakdown`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.store.database import Sql, Transaction
from app.store.usage_rows import ATTRIBUTION_COLUMNS, KEY_WIDTH, SUMMED, AttributionRow, summed
from domain.attribution import USER, dimensions
from domain.attribution_bounds import OTHER, Admission
from domain.ledger import TeamLedger

TABLE = "usage_by_attribution"
#: The key of a row (its first fields), then what it sums: the fields of :class:`AttributionRow`.
COLUMNS = ATTRIBUTION_COLUMNS
KEY = COLUMNS[:KEY_WIDTH]
_ADD = f"INSERT INTO {TABLE} ({', '.join(COLUMNS)})"
_ON_CONFLICT = f"ON CONFLICT ({', '.join(KEY)}) DO UPDATE SET " + ", ".join(
    f"{c} = {TABLE}.{c} + excluded.{c}" for c in SUMMED
)

#: How many tag dimensions a report lists (the most used); any other can still be asked for by name.
MAX_DIMENSIONS_SHOWN = 100
#: Values per ``IN (...)`` list (SQLite's limit on a statement's parameters is far above).
_IN_CHUNK = 500


def attribution_rows(team_name: str, event: object) -> list[AttributionRow]:
    """A charge's rows (its end user's, and one per tag), as they are stored; none for any other event."""
    if not isinstance(event, TeamLedger.Charged):
        return []
    u = event.usage
    day = event.timestamp.date().isoformat()
    cache_writes = int(u["cache_write_tokens"]) + int(u.get("cache_write_1h_tokens", 0))
    return [
        AttributionRow(
            team_name=team_name,
            dimension=dimension,
            value=value,
            day=day,
            requests=1,
            input_tokens=u["input_tokens"],
            output_tokens=u["output_tokens"],
            cache_write_tokens=cache_writes,
            cache_hit_tokens=u["cache_hit_tokens"],
            cost=event.charged,
        ).storable()
        for dimension, value in dimensions(event.tags, event.end_user)
    ]


def write(tx: Transaction, rows: Sequence[AttributionRow]) -> None:
    """Add a slice's rows to the table, summed first (a statement may not upsert a row twice)."""
    tx.insert_many(_ADD, [row.values() for row in summed(rows)], _ON_CONFLICT)


def admitted(sql: Sql, rows: Sequence[AttributionRow]) -> list[AttributionRow]:
    """A slice's rows within the bounds (``domain/attribution_bounds.py``), each team's day taken up
    where the rows already stored left it: what is counted of the slice's teams and days, and which
    of its values have rows, read in a few queries whatever the number of teams."""
    if not rows:
        return []
    days = {(row.team_name, row.day) for row in rows}
    where = (
        f"team_name IN ({', '.join('?' * len({t for t, _ in days}))}) "
        f"AND day IN ({', '.join('?' * len({d for _, d in days}))})"
    )
    params = [*sorted({t for t, _ in days}), *sorted({d for _, d in days})]
    counts: dict[tuple[str, str], list[tuple[str, int]]] = {day: [] for day in days}
    for team, day, dimension, n in sql.tuples(
        f"SELECT team_name, day, dimension, SUM(CASE WHEN value IN ('', ?) THEN 0 ELSE 1 END) FROM {TABLE} "
        f"WHERE {where} GROUP BY team_name, day, dimension",
        [OTHER, *params],
    ):
        if (team, day) in counts:
            counts[(team, day)].append((dimension, int(n)))
    known: dict[tuple[str, str], list[tuple[str, str]]] = {day: [] for day in days}
    values = sorted({row.value for row in rows})
    for at in range(0, len(values), _IN_CHUNK):  # which of the values about to be counted have rows
        chunk = values[at : at + _IN_CHUNK]
        for team, day, dimension, value in sql.tuples(
            f"SELECT team_name, day, dimension, value FROM {TABLE} WHERE {where} "
            f"AND value IN ({', '.join('?' * len(chunk))})",
            [*params, *chunk],
        ):
            if (team, day) in known:
                known[(team, day)].append((dimension, value))
    admission = Admission()
    for team, day in days:
        admission.seed(team, day, counts[(team, day)], known[(team, day)])
    return admission.admit(rows)


def everything(sql: Sql) -> list[AttributionRow]:
    """Every row (for ``ledger verify``: as many as team × dimension × value × day)."""
    return [AttributionRow.read(row) for row in sql.query(f"SELECT {', '.join(COLUMNS)} FROM {TABLE}", [])]


def dimensions_of(sql: Sql, team: str) -> list[str]:
    """The dimensions the team's charges were counted under: ``user``, then its most used tags' (at
    most :data:`MAX_DIMENSIONS_SHOWN` of them), by name."""
    rows = sql.query(
        f"SELECT dimension FROM {TABLE} WHERE team_name = ? AND dimension <> ? GROUP BY dimension "
        f"ORDER BY SUM(requests) DESC, dimension LIMIT {MAX_DIMENSIONS_SHOWN}",
        [team, USER],
    )
    used = sql.query(f"SELECT 1 AS one FROM {TABLE} WHERE team_name = ? AND dimension = ? LIMIT 1", [team, USER])
    return ([USER] if used else []) + sorted(r["dimension"] for r in rows)


@dataclass(frozen=True)
class Breakdown:
    """A page of a team's usage by the values of one dimension, the largest cost first: each row's
    ``value`` (``""``: charges without it; :data:`~domain.attribution_bounds.OTHER`: beyond the
    bounds) and sums; how many values there are in all; and the team's totals."""

    rows: list[dict[str, Any]]
    values: int
    total: dict[str, int]


def breakdown(
    sql: Sql, team: str, dimension: str, since: str | None = None, *, limit: int = 100, offset: int = 0
) -> Breakdown:
    """The team's usage by the values of ``dimension`` (summed over the days from ``since``, an ISO
    day), ``limit`` values from the ``offset``-th, the largest cost first (then the most requests,
    then the value, by code point); a tag's charges without it under the value ``""``. One page is
    read, never every value: a team may have a thousand new ones a day."""
    where, params = "team_name = ? AND dimension = ?", [team, dimension]
    if since:
        where += " AND day >= ?"
        params.append(since[:10])
    sums = ", ".join(f"SUM({c}) AS {c}" for c in SUMMED)
    total = _sums(sql.query(f"SELECT {sums} FROM {TABLE} WHERE {where}", [team, USER, *params[2:]])[0])
    grouped = f"SELECT value, {sums} FROM {TABLE} WHERE {where} GROUP BY value"
    values = int(sql.query(f"SELECT COUNT(*) AS n FROM ({grouped}) g", params)[0]["n"])
    untagged: list[int] | None = None
    if dimension != USER:
        tagged = _sums(sql.query(f"SELECT {sums} FROM {TABLE} WHERE {where}", params)[0])
        untagged = [total[c] - tagged[c] for c in SUMMED]
        if not untagged[0]:  # a tag's value is never "" (``parse_tags``): this row is the untagged charges alone
            untagged = None
    bytewise = ' COLLATE "C"' if sql.kind == "postgresql" else ""  # code point order, as SQLite's default
    order = f"ORDER BY cost DESC, requests DESC, value{bytewise}"

    def page(at: int, size: int) -> list[dict[str, Any]]:
        if size <= 0:
            return []
        found = sql.query(f"SELECT * FROM ({grouped}) g {order} LIMIT {int(size)} OFFSET {int(at)}", params)
        return [{"value": r["value"], **_sums(r)} for r in found]

    if untagged is None:
        return Breakdown(page(offset, limit), values, total)
    cost, requests = untagged[SUMMED.index("cost")], untagged[SUMMED.index("requests")]
    rank = int(
        sql.query(
            f"SELECT COUNT(*) AS n FROM ({grouped}) g WHERE cost > ? OR (cost = ? AND requests > ?)",
            [*params, cost, cost, requests],
        )[0]["n"]
    )  # "" comes first among equals
    none = {"value": "", **dict(zip(SUMMED, untagged, strict=True))}
    if rank < offset:
        rows = page(offset - 1, limit)
    elif rank < offset + limit:
        rows = page(offset, limit - 1)
        rows.insert(rank - offset, none)
    else:
        rows = page(offset, limit)
    return Breakdown(rows, values + 1, total)


def _sums(row: dict[str, Any]) -> dict[str, int]:
    return {c: int(row[c] or 0) for c in SUMMED}
