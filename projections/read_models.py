"""The read models kept in the same transaction as the events: SQL shared by both backends.

SQLite and PostgreSQL agree on this SQL (including ``ON CONFLICT … DO UPDATE … WHERE``); only the
parameter marker differs, so each statement is written once with ``{p}`` for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """What authentication needs to know about an API key."""

    team_id: UUID
    team_name: str
    key_id: str
    revoked: bool


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A key row for the directory, made from a ``KeyIssued`` event about to be saved."""

    key_hash: str
    team_id: UUID
    team_name: str
    key_id: str


@dataclass(frozen=True, slots=True)
class BalanceRecord:
    team_id: UUID
    team_name: str
    balance: int
    held: int
    version: int


INSERT_KEY = "INSERT INTO api_keys (key_hash, team_id, team_name, key_id, revoked) VALUES ({p}, {p}, {p}, {p}, 0)"
UPSERT_BALANCE = (
    "INSERT INTO team_balances (team_id, team_name, balance, held, version) VALUES ({p}, {p}, {p}, {p}, {p}) "
    "ON CONFLICT (team_id) DO UPDATE SET balance = excluded.balance, held = excluded.held, "
    "version = excluded.version WHERE team_balances.version < excluded.version"
)
SELECT_KEY = "SELECT team_id, team_name, key_id, revoked FROM api_keys WHERE key_hash = {p}"
SELECT_BALANCES = "SELECT team_id, team_name, balance, held, version FROM team_balances ORDER BY team_name"


class ReadModelWriter:
    """Writes the read-model rows of a batch with a DB-API cursor, in the caller's transaction."""

    def __init__(self, marker: str) -> None:
        self.insert_key = INSERT_KEY.format(p=marker)
        self.upsert_balance = UPSERT_BALANCE.format(p=marker)
        self.select_key = SELECT_KEY.format(p=marker)

    def write(self, cursor: Any, keys: Sequence[IssuedKey], balances: Sequence[BalanceRecord]) -> None:
        for k in keys:
            cursor.execute(self.insert_key, (k.key_hash, k.team_id.hex, k.team_name, k.key_id))
        # One lock order for every writer: concurrent batches touching the same teams cannot deadlock.
        for b in sorted(balances, key=lambda b: b.team_id.hex):
            cursor.execute(self.upsert_balance, (b.team_id.hex, b.team_name, b.balance, b.held, b.version))


def key_record(row: Any) -> KeyRecord:
    return KeyRecord(UUID(row["team_id"]), row["team_name"], row["key_id"], bool(row["revoked"]))


def balance_record(row: Any) -> BalanceRecord:
    return BalanceRecord(UUID(row["team_id"]), row["team_name"], row["balance"], row["held"], row["version"])
