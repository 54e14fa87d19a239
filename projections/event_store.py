"""The event store, and the read models written in the same transaction as the events.

The library owns the events table. Two small read models are kept *strongly* consistent with it by
writing them inside the very transaction that appends the events (the recorder's
``_insert_events`` hook): the key directory (key hash → team), which authentication reads, and the
team balances, which operators and ``ledger verify`` read. Both can be rebuilt from the events.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import Notification, StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor

from domain.ledger import TeamLedger
from projections.migrations import HEAD


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """What authentication needs to know about an API key."""

    team_id: UUID
    team_name: str
    key_id: str
    revoked: bool


@dataclass(frozen=True, slots=True)
class BalanceRecord:
    team_id: UUID
    team_name: str
    balance: int
    held: int
    version: int


class SQLiteLedgerRecorder(SQLiteApplicationRecorder):
    """The SQLite events recorder, plus the key directory and balances in the same transaction.

    The library creates the events table; the read-model tables are alembic's
    (:mod:`projections.schema`), created by :func:`open_ledger_store` before this recorder runs.
    """

    def _insert_events(
        self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        keys: Sequence[IssuedKey] = kwargs.get("keys", ())
        balances: Sequence[BalanceRecord] = kwargs.get("balances", ())
        notification_ids = super()._insert_events(c, stored_events, **kwargs)
        for k in keys:
            c.execute(
                "INSERT INTO api_keys VALUES (?, ?, ?, ?, ?)",
                (k.key_id_hash, k.team_id.hex, k.team_name, k.key_id, int(k.revoked)),
            )
        for b in balances:
            c.execute(
                "INSERT INTO team_balances VALUES (?, ?, ?, ?, ?) ON CONFLICT (team_id) DO UPDATE SET "
                "balance = excluded.balance, held = excluded.held, version = excluded.version "
                "WHERE team_balances.version < excluded.version",
                (b.team_id.hex, b.team_name, b.balance, b.held, b.version),
            )
        return notification_ids

    def find_key(self, key_hash: str) -> KeyRecord | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT team_id, team_name, key_id, revoked FROM api_keys WHERE key_hash = ?", (key_hash,))
            row = c.fetchone()
        if row is None:
            return None
        return KeyRecord(UUID(row["team_id"]), row["team_name"], row["key_id"], bool(row["revoked"]))

    def balances(self) -> list[BalanceRecord]:
        with self.datastore.transaction(commit=False) as c:
            c.execute("SELECT team_id, team_name, balance, held, version FROM team_balances ORDER BY team_name")
            rows = c.fetchall()
        return [BalanceRecord(UUID(r["team_id"]), r["team_name"], r["balance"], r["held"], r["version"]) for r in rows]


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A key row for the directory, made from a ``KeyIssued`` event about to be saved."""

    key_id_hash: str
    team_id: UUID
    team_name: str
    key_id: str
    revoked: bool = False


class LedgerStore(Application[UUID]):
    """The team ledgers' event store (a thin eventsourcing application)."""

    name = "Ledger"

    def save_teams(self, teams: Iterable[TeamLedger]) -> None:
        """Append the teams' pending events and update the read models, in one transaction."""
        teams = [t for t in teams if t.pending_events]
        if not teams:
            return
        keys = [
            IssuedKey(e.key_hash, t.id, t.name, e.key_id)
            for t in teams
            for e in t.pending_events
            if isinstance(e, TeamLedger.KeyIssued)
        ]
        balances = [BalanceRecord(t.id, t.name, t.balance, t.held, t.version) for t in teams]
        self.save(*teams, keys=keys, balances=balances)

    def find_team(self, team_id: UUID) -> TeamLedger | None:
        try:
            return self.repository.get(team_id)  # type: ignore[return-value]
        except AggregateNotFoundError:
            return None

    def newer_events(self, team: TeamLedger) -> list[TeamLedger.Event]:
        """Events another process appended to ``team`` since this copy was loaded."""
        return list(self.events.get(team.id, gt=team.version))  # type: ignore[arg-type]

    def find_key(self, key_hash: str) -> KeyRecord | None:
        return self.recorder.find_key(key_hash)  # type: ignore[attr-defined]

    def balances(self) -> list[BalanceRecord]:
        return self.recorder.balances()  # type: ignore[attr-defined]

    def notifications(self, batch: int = 1000) -> Iterator[Notification]:
        """Every stored event in commit order (the notification log), read in batches."""
        last = 0
        while True:
            page = self.recorder.select_notifications(last, batch, inclusive_of_start=False)
            if not page:
                return
            yield from page
            last = page[-1].id


def sqlite_path(database_url: str, base_dir: Path) -> Path:
    """``sqlite:///relative.db`` is relative to the config file's folder; ``sqlite:////abs.db`` is absolute."""
    raw = database_url.removeprefix("sqlite:///")
    path = Path(raw)
    return path if path.is_absolute() else (base_dir / path)


def _read_models_revision(path: Path) -> str | None:
    """The alembic revision an SQLite file is at (None for a new or unmigrated file)."""
    if not path.exists():
        return None
    with closing(sqlite3.connect(path)) as db:
        try:
            row = db.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.OperationalError:
            return None
    return row[0] if row else None


def sqlalchemy_url(database_url: str, base_dir: Path) -> str:
    """The same database as SQLAlchemy (and so alembic) names it."""
    return f"sqlite:///{sqlite_path(database_url, base_dir).resolve()}"


def open_ledger_store(database_url: str, base_dir: Path) -> LedgerStore:
    """Open the event store named by a ``database_url``, creating it and migrating its read models.

    SQLite is the zero-setup store, so every open brings it up to date (a no-op when current).
    """
    path = sqlite_path(database_url, base_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    if _read_models_revision(path) != HEAD:
        from projections.schema import upgrade_read_models

        upgrade_read_models(sqlalchemy_url(database_url, base_dir))
    env = {
        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
        "SQLITE_DBNAME": str(path),
        "SQLITE_LOCK_TIMEOUT": "30",
        "APPLICATION_RECORDER_TOPIC": f"{SQLiteLedgerRecorder.__module__}:{SQLiteLedgerRecorder.__qualname__}",
        "CREATE_TABLE": "y",
        "IS_SNAPSHOTTING_ENABLED": "n",
    }
    return LedgerStore(env=env)
