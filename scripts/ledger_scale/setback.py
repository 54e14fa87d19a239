"""Putting the ledger in the states the scenarios need, and back.

- A team without its snapshots: they are moved to a table of their own (``team_snapshots_aside``)
  and moved back afterwards — a run stopped in between moves them back on its next start. Loading
  the team is then a full replay.
- A projection backlog: the audit history loses its last N events' rows (``ledger_entries`` after
  the new position, and ``usage_daily``, ``usage_by_attribution`` and ``usage_by_endpoint``
  recomputed from the entries that stay, which is exactly
  what the projection had written for them) and its position in ``projection_tracking`` goes back
  N events. The gateway's projector then catches up, as after an outage; ``ledger verify`` checks
  afterwards that the history it wrote matches the events.
"""

from __future__ import annotations

from uuid import UUID

from app.store.database import Sql
from app.store.event_store import open_ledger_store
from app.store.usage_rows import SUMMED, USAGE_COLUMNS, AttributionRow
from domain.attribution import dimensions, parse_tags
from projections import attribution, endpoint_usage
from projections.history import NAME, HistoryProjection
from scripts.ledger_scale.ledger import Ledger

ASIDE = "team_snapshots_aside"
_USAGE_FROM_ENTRIES = (
    f"INSERT INTO usage_daily ({', '.join(USAGE_COLUMNS)}) "
    "SELECT team_name, key_id, model, substr(occurred_at, 1, 10), COUNT(*), SUM(input_tokens), SUM(output_tokens), "
    "SUM(cache_write_tokens), SUM(cache_hit_tokens), -SUM(amount) FROM ledger_entries WHERE kind = 'charge' "
    "GROUP BY team_name, key_id, model, substr(occurred_at, 1, 10)"
)

_SUMS = (
    "COUNT(*) AS requests, SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens, "
    "SUM(cache_write_tokens) AS cache_write_tokens, SUM(cache_hit_tokens) AS cache_hit_tokens, "
    "-SUM(amount) AS cost"
)


def _attribution_from_entries(sql: Sql, upto: int) -> list[AttributionRow]:
    """The ``usage_by_attribution`` rows of the entries up to event ``upto``: their sums by team,
    tags, end user and day (few distinct tag sets), spread over each charge's dimensions as the
    projection spreads them."""
    groups = sql.query(
        f"SELECT team_name, tags, end_user, substr(occurred_at, 1, 10) AS day, {_SUMS} "
        "FROM ledger_entries WHERE kind = 'charge' AND notification_id <= ? "
        "GROUP BY team_name, tags, end_user, substr(occurred_at, 1, 10)",
        (upto,),
    )
    rows: list[AttributionRow] = []
    for g in groups:
        counts = {c: int(g[c]) for c in SUMMED}
        rows += [
            AttributionRow(team_name=g["team_name"], dimension=d, value=v, day=g["day"], **counts)
            for d, v in dimensions(parse_tags(g["tags"]), g["end_user"])
        ]
    return rows


def _aside_exists(ledger: Ledger) -> bool:
    sql = ledger.sql()
    try:
        if ledger.backend == "sqlite":
            rows = sql.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", (ASIDE,))
        else:
            rows = sql.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename = ?", (ASIDE,))
        return bool(rows)
    finally:
        sql.close()


def snapshots_aside(ledger: Ledger, team: UUID) -> int:
    """Move the team's snapshots out of the way; returns how many."""
    sql = ledger.sql()
    try:
        with sql.transaction() as tx:
            tx.execute(f"CREATE TABLE {ASIDE} AS SELECT * FROM team_snapshots WHERE team_id = ?", (team.hex,))
            return tx.execute("DELETE FROM team_snapshots WHERE team_id = ?", (team.hex,))
    finally:
        sql.close()


def snapshots_back(ledger: Ledger) -> None:
    """Move snapshots set aside back (those the gateway took meanwhile stay too)."""
    if not _aside_exists(ledger):
        return
    sql = ledger.sql()
    try:
        with sql.transaction() as tx:
            tx.execute(f"INSERT INTO team_snapshots SELECT * FROM {ASIDE} WHERE true ON CONFLICT DO NOTHING")
            tx.execute(f"DROP TABLE {ASIDE}")
    finally:
        sql.close()


def snapshot_count(ledger: Ledger, team: UUID) -> int:
    sql = ledger.sql()
    try:
        return int(sql.query("SELECT COUNT(*) AS n FROM team_snapshots WHERE team_id = ?", (team.hex,))[0]["n"])
    finally:
        sql.close()


def snapshot_versions(ledger: Ledger, team: UUID, latest: int = 2) -> list[int]:
    """The versions of the team's ``latest`` snapshots, newest first."""
    sql = ledger.sql()
    try:
        rows = sql.query(
            "SELECT version FROM team_snapshots WHERE team_id = ? ORDER BY version DESC LIMIT ?", (team.hex, latest)
        )
        return [int(r["version"]) for r in rows]
    finally:
        sql.close()


def history_position(ledger: Ledger) -> int:
    sql = ledger.sql()
    try:
        rows = sql.query("SELECT notification_id FROM projection_tracking WHERE name = ?", (NAME,))
        return int(rows[0]["notification_id"]) if rows else 0
    finally:
        sql.close()


def set_history_back(ledger: Ledger, events: int) -> tuple[int, int]:
    """Put the audit history ``events`` events behind the event log (caught up with it first);
    returns the new position and the position it must catch up to."""
    store = open_ledger_store(ledger.database_url, ledger.workdir, pool_size=2)
    history = HistoryProjection(store, store.database)
    try:
        history.catch_up(batch=5000)
    finally:
        history.close()
        store.close()
    sql = ledger.sql()
    try:
        top = history_position(ledger)
        position = max(0, top - events)
        attributed = _attribution_from_entries(sql, position)
        with sql.transaction() as tx:
            tx.execute("DELETE FROM ledger_entries WHERE notification_id > ?", (position,))
            tx.execute("DELETE FROM usage_daily")
            tx.execute(_USAGE_FROM_ENTRIES)
            tx.execute(f"DELETE FROM {attribution.TABLE}")
            attribution.write(tx, attributed)
            tx.execute(f"DELETE FROM {endpoint_usage.TABLE}")
            tx.execute(*endpoint_usage.rows_from_entries(position))
            tx.execute("UPDATE projection_tracking SET notification_id = ? WHERE name = ?", (position, NAME))
        return position, top
    finally:
        sql.close()


class Position:
    """The audit history's position, read on one connection kept open (polled while it catches up)."""

    def __init__(self, ledger: Ledger) -> None:
        self._sql = ledger.sql()

    def __call__(self) -> int:
        rows = self._sql.query("SELECT notification_id FROM projection_tracking WHERE name = ?", (NAME,))
        return int(rows[0]["notification_id"]) if rows else 0

    def close(self) -> None:
        self._sql.close()
