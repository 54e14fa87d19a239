"""The read models kept in the same transaction as the events: SQL shared by both backends.

SQLite and PostgreSQL agree on this SQL (including ``ON CONFLICT … DO UPDATE … WHERE``); only the
parameter marker differs, so each statement is written once with ``{p}`` for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    models: tuple[str, ...] = ()  # the models it may use; empty = any


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A key row for the directory, made from a ``KeyIssued`` event about to be saved."""

    key_hash: str
    team_id: UUID
    team_name: str
    key_id: str


@dataclass(frozen=True, slots=True)
class KeyChange:
    """A change to an issued key (revoked, or its models restricted), from an event about to be saved."""

    key_hash: str
    revoked: bool | None = None
    models: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class BalanceRecord:
    team_id: UUID
    team_name: str
    balance: int
    held: int
    version: int


@dataclass(frozen=True, slots=True)
class IdempotentResponse:
    """A completed request's answer, kept under the client's Idempotency-Key."""

    team_id: UUID
    idem_key: str
    body_hash: str
    request_id: str
    content_type: str
    response: bytes
    created_at: str


INSERT_IDEMPOTENT = ("INSERT INTO idempotency_keys (team_id, idem_key, body_hash, request_id, content_type, response, "
                     "created_at) VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p})")
SELECT_IDEMPOTENT = ("SELECT body_hash, request_id, content_type, response, created_at FROM idempotency_keys "
                     "WHERE team_id = {p} AND idem_key = {p}")
INSERT_KEY = "INSERT INTO api_keys (key_hash, team_id, team_name, key_id, revoked) VALUES ({p}, {p}, {p}, {p}, 0)"
UPSERT_BALANCE = (
    "INSERT INTO team_balances (team_id, team_name, balance, held, version) VALUES ({p}, {p}, {p}, {p}, {p}) "
    "ON CONFLICT (team_id) DO UPDATE SET balance = excluded.balance, held = excluded.held, "
    "version = excluded.version WHERE team_balances.version < excluded.version"
)
REVOKE_KEY = "UPDATE api_keys SET revoked = 1 WHERE key_hash = {p}"
RESTRICT_KEY = "UPDATE api_keys SET models = {p} WHERE key_hash = {p}"
SELECT_KEY = "SELECT team_id, team_name, key_id, revoked, models FROM api_keys WHERE key_hash = {p}"
SELECT_BALANCES = "SELECT team_id, team_name, balance, held, version FROM team_balances ORDER BY team_name"
SELECT_HOLDING = "SELECT team_id, team_name, balance, held, version FROM team_balances WHERE held > 0"


class ReadModelWriter:
    """Writes the read-model rows of a batch with a DB-API cursor, in the caller's transaction."""

    def __init__(self, marker: str) -> None:
        self.insert_key = INSERT_KEY.format(p=marker)
        self.upsert_balance = UPSERT_BALANCE.format(p=marker)
        self.select_key = SELECT_KEY.format(p=marker)
        self.revoke_key = REVOKE_KEY.format(p=marker)
        self.restrict_key = RESTRICT_KEY.format(p=marker)
        self.insert_idempotent = INSERT_IDEMPOTENT.format(p=marker)
        self.select_idempotent = SELECT_IDEMPOTENT.format(p=marker)

    def write(self, cursor: Any, keys: Sequence[IssuedKey], balances: Sequence[BalanceRecord],
              key_changes: Sequence[KeyChange] = (), idempotent: Sequence[IdempotentResponse] = ()) -> None:
        for r in idempotent:
            cursor.execute(self.insert_idempotent, (r.team_id.hex, r.idem_key, r.body_hash, r.request_id,
                                                    r.content_type, r.response, r.created_at))
        for k in keys:
            cursor.execute(self.insert_key, (k.key_hash, k.team_id.hex, k.team_name, k.key_id))
        for change in key_changes:
            if change.revoked:
                cursor.execute(self.revoke_key, (change.key_hash,))
            if change.models is not None:
                cursor.execute(self.restrict_key, (",".join(change.models), change.key_hash))
        # One lock order for every writer: concurrent batches touching the same teams cannot deadlock.
        for b in sorted(balances, key=lambda b: b.team_id.hex):
            cursor.execute(self.upsert_balance, (b.team_id.hex, b.team_name, b.balance, b.held, b.version))


def key_record(row: Any) -> KeyRecord:
    models = tuple(m for m in (row["models"] or "").split(",") if m)
    return KeyRecord(UUID(row["team_id"]), row["team_name"], row["key_id"], bool(row["revoked"]), models)


def balance_record(row: Any) -> BalanceRecord:
    return BalanceRecord(UUID(row["team_id"]), row["team_name"], row["balance"], row["held"], row["version"])


def idempotent_response(team_id: UUID, idem_key: str, row: Any) -> IdempotentResponse:
    return IdempotentResponse(team_id, idem_key, row["body_hash"], row["request_id"], row["content_type"],
                              bytes(row["response"]), row["created_at"])


class ReadModelQueries:
    """The read-model lookups, written once; each recorder supplies ``_fetch`` on its own datastore."""

    read_models: ReadModelWriter
    _fetch: Callable[..., list[Any]]  # (sql, params) -> rows, on the recorder's own connections

    def find_key(self, key_hash: str) -> KeyRecord | None:
        rows = self._fetch(self.read_models.select_key, (key_hash,))
        return key_record(rows[0]) if rows else None

    def balances(self, holding_only: bool = False) -> list[BalanceRecord]:
        return [balance_record(r) for r in self._fetch(SELECT_HOLDING if holding_only else SELECT_BALANCES)]

    def find_idempotent(self, team_id: UUID, idem_key: str) -> IdempotentResponse | None:
        rows = self._fetch(self.read_models.select_idempotent, (team_id.hex, idem_key))
        return idempotent_response(team_id, idem_key, rows[0]) if rows else None
