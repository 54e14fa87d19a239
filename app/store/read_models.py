"""The read models kept in the same transaction as the events: SQL shared by both backends.

SQLite and PostgreSQL agree on this SQL (including ``ON CONFLICT … DO UPDATE … WHERE``); only the
parameter marker differs, so each statement is written once with ``{p}`` for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from app.store.admin_key_directory import SELECT_ADMIN_KEY, SELECT_ADMIN_KEYS, UPSERT_ADMIN_KEY, AdminKeyRecord
from app.store.many_rows import insert_rows

if TYPE_CHECKING:
    from domain.ledger import TeamLedger


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """What authentication needs to know about an API key: its team, and what it may do.

    A row carries its team's policy too (suspension, team rate limits), copied onto every key of
    the team, so a request's key is resolved with one primary-key lookup.
    """

    key_hash: str
    team_id: UUID
    team_name: str
    key_id: str
    revoked: bool = False
    models: tuple[str, ...] = ()  # the models it may use; empty = any
    endpoints: tuple[str, ...] = ()  # the endpoints it may call; empty = any
    key_rpm: int | None = None
    key_tpm: int | None = None
    team_rpm: int | None = None
    team_tpm: int | None = None
    suspended: bool = False
    version: int = 0  # the team's version this row reflects: an older row never replaces a newer one
    clamp_output: bool = False  # a request its balance cannot cover is given what it covers, not 402
    price_adjustments: tuple[tuple[str, str], ...] = ()  # the team's, (model or "", percent)
    budgeted: bool = False  # the key has a budget of its own: its requests are held in the ledger, one by one

    def as_row(self) -> tuple[Any, ...]:
        return (
            self.key_hash,
            self.team_id.hex,
            self.team_name,
            self.key_id,
            int(self.revoked),
            ",".join(self.models),
            ",".join(self.endpoints),
            self.key_rpm,
            self.key_tpm,
            self.team_rpm,
            self.team_tpm,
            int(self.suspended),
            self.version,
            int(self.clamp_output),
            ",".join(f"{m}={p}" for m, p in self.price_adjustments),
            int(self.budgeted),
        )


KEY_COLUMNS = (
    "key_hash",
    "team_id",
    "team_name",
    "key_id",
    "revoked",
    "models",
    "endpoints",
    "key_rpm",
    "key_tpm",
    "team_rpm",
    "team_tpm",
    "suspended",
    "version",
    "clamp_output",
    "price_adjustments",
    "budgeted",
)


def adjustments_of(text: str) -> tuple[tuple[str, str], ...]:
    """The price adjustments a key row holds (``model=percent,…``; an empty model is every model)."""
    return tuple((model, percent) for model, _, percent in (pair.partition("=") for pair in text.split(",") if pair))


def key_records(team: TeamLedger) -> list[KeyRecord]:
    """The key rows a team's state implies."""
    return [
        KeyRecord(
            k.key_hash,
            team.id,
            team.name,
            key_id,
            k.revoked,
            k.models,
            k.endpoints,
            k.rpm,
            k.tpm,
            team.rpm,
            team.tpm,
            team.suspended,
            team.policy_version,
            team.clamps_output(key_id),
            tuple(sorted(team.price_adjustments.items())),
            k.budget is not None,
        )
        for key_id, k in team.keys.items()
    ]


@dataclass(frozen=True, slots=True)
class BalanceRecord:
    team_id: UUID
    team_name: str
    balance: int
    held: int
    version: int


@dataclass(frozen=True, slots=True)
class IdempotentResponse:
    """A completed request's answer, kept under the client's Idempotency-Key until ``expires_at``
    (Unix time); after that a retry with the key is a new request."""

    team_id: UUID
    idem_key: str
    body_hash: str
    request_id: str
    content_type: str
    response: bytes
    created_at: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class ChargeRecord:
    """A request's one charge, as the store keeps it to refuse a second: what was debited, and the
    team's balance right after (``version``: the ``Charged`` event's)."""

    team_id: UUID
    request_id: str
    version: int
    charged: int
    balance_after: int


#: An expired answer under the same key is replaced, in the transaction that stores the new one.
DELETE_EXPIRED_IDEMPOTENT = "DELETE FROM idempotency_keys WHERE team_id = {p} AND idem_key = {p} AND expires_at <= {p}"
INSERT_IDEMPOTENT = (
    "INSERT INTO idempotency_keys (team_id, idem_key, body_hash, request_id, content_type, response, "
    "created_at, expires_at) VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p})"
)
#: An answer kept outside a charge (a batch, a file: nothing is charged when they are made); a key
#: answered already keeps its first answer.
KEEP_IDEMPOTENT = INSERT_IDEMPOTENT + " ON CONFLICT (team_id, idem_key) DO NOTHING"
SELECT_IDEMPOTENT = (
    "SELECT body_hash, request_id, content_type, response, created_at, expires_at FROM idempotency_keys "
    "WHERE team_id = {p} AND idem_key = {p} AND expires_at > {p}"
)
SELECT_CHARGE = "SELECT version, charged, balance_after FROM charged_requests WHERE team_id = {p} AND request_id = {p}"
CHARGE_TOTALS = (
    "SELECT COUNT(*) AS n, COALESCE(SUM(charged), 0) AS total FROM charged_requests "
    "WHERE team_id = {p} AND version <= {p}"
)
UPSERT_KEY = (
    f"INSERT INTO api_keys ({', '.join(KEY_COLUMNS)}) VALUES ({', '.join(['{p}'] * len(KEY_COLUMNS))}) "
    f"ON CONFLICT (key_hash) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in KEY_COLUMNS[1:])} "
    "WHERE api_keys.version < excluded.version"
)
INSERT_CHARGES = "INSERT INTO charged_requests (team_id, request_id, version, charged, balance_after)"
INSERT_BALANCES = "INSERT INTO team_balances (team_id, team_name, balance, held, version)"
ON_BALANCE_CONFLICT = (
    "ON CONFLICT (team_id) DO UPDATE SET balance = excluded.balance, held = excluded.held, "
    "version = excluded.version WHERE team_balances.version < excluded.version"
)
SELECT_KEY = f"SELECT {', '.join(KEY_COLUMNS)} FROM api_keys WHERE key_hash = {{p}}"
SELECT_BALANCES = "SELECT team_id, team_name, balance, held, version FROM team_balances ORDER BY team_name"
SELECT_HOLDING = "SELECT team_id, team_name, balance, held, version FROM team_balances WHERE held > 0"


class ReadModelWriter:
    """Writes the read-model rows of a batch with a DB-API cursor, in the caller's transaction."""

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.upsert_key = UPSERT_KEY.format(p=marker)
        self.select_key = SELECT_KEY.format(p=marker)
        self.delete_expired_idempotent = DELETE_EXPIRED_IDEMPOTENT.format(p=marker)
        self.insert_idempotent = INSERT_IDEMPOTENT.format(p=marker)
        self.select_idempotent = SELECT_IDEMPOTENT.format(p=marker)
        self.select_charge = SELECT_CHARGE.format(p=marker)
        self.charge_totals = CHARGE_TOTALS.format(p=marker)
        self.upsert_admin_key = UPSERT_ADMIN_KEY.format(p=marker)
        self.select_admin_key = SELECT_ADMIN_KEY.format(p=marker)

    def write(
        self,
        cursor: Any,
        keys: Sequence[KeyRecord],
        balances: Sequence[BalanceRecord],
        idempotent: Sequence[IdempotentResponse] = (),
        charges: Sequence[ChargeRecord] = (),
        admin_keys: Sequence[AdminKeyRecord] = (),
    ) -> None:
        """Charges first: a second charge of a request fails the transaction before anything else is sent."""
        # Each in one statement, however many rows (``app/store/many_rows.py``: why).
        insert_rows(
            cursor,
            INSERT_CHARGES,
            [(c.team_id.hex, c.request_id, c.version, c.charged, c.balance_after) for c in charges],
            marker=self.marker,
        )
        now = time.time()
        for r in idempotent:
            cursor.execute(self.delete_expired_idempotent, (r.team_id.hex, r.idem_key, now))
            cursor.execute(
                self.insert_idempotent,
                (
                    r.team_id.hex,
                    r.idem_key,
                    r.body_hash,
                    r.request_id,
                    r.content_type,
                    r.response,
                    r.created_at,
                    r.expires_at,
                ),
            )
        for k in keys:
            cursor.execute(self.upsert_key, k.as_row())
        for a in admin_keys:
            cursor.execute(self.upsert_admin_key, a.as_row())
        # One lock order for every writer: concurrent batches touching the same teams cannot deadlock.
        # (One row per team: a statement may not upsert a row twice on PostgreSQL.)
        insert_rows(
            cursor,
            INSERT_BALANCES,
            [
                (b.team_id.hex, b.team_name, b.balance, b.held, b.version)
                for b in sorted(balances, key=lambda b: b.team_id.hex)
            ],
            ON_BALANCE_CONFLICT,
            self.marker,
        )


def key_record(row: Any) -> KeyRecord:
    def listed(column: str) -> tuple[str, ...]:
        return tuple(m for m in (row[column] or "").split(",") if m)

    return KeyRecord(
        row["key_hash"],
        UUID(row["team_id"]),
        row["team_name"],
        row["key_id"],
        bool(row["revoked"]),
        listed("models"),
        listed("endpoints"),
        row["key_rpm"],
        row["key_tpm"],
        row["team_rpm"],
        row["team_tpm"],
        bool(row["suspended"]),
        row["version"],
        bool(row["clamp_output"]),
        adjustments_of(row["price_adjustments"] or ""),
        bool(row["budgeted"]),
    )


def balance_record(row: Any) -> BalanceRecord:
    return BalanceRecord(UUID(row["team_id"]), row["team_name"], row["balance"], row["held"], row["version"])


def idempotent_response(team_id: UUID, idem_key: str, row: Any) -> IdempotentResponse:
    return IdempotentResponse(
        team_id,
        idem_key,
        row["body_hash"],
        row["request_id"],
        row["content_type"],
        bytes(row["response"]),
        row["created_at"],
        float(row["expires_at"]),
    )


class ReadModelQueries:
    """The read-model lookups, written once; each recorder supplies ``_fetch`` on its own datastore."""

    read_models: ReadModelWriter
    _fetch: Callable[..., list[Any]]  # (sql, params) -> rows, on the recorder's own connections
    _write_many: Callable[[str, Sequence[Sequence[Any]]], None]  # (sql, rows), in one transaction of its own

    def read_rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """Rows of a query written with ``{p}`` for each parameter, as mappings by column name."""
        return self._fetch(sql.format(p=self.read_models.marker), params)

    def write_rows(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """A statement written with ``{p}`` for each parameter, once per row, in one transaction."""
        if rows:
            self._write_many(sql.format(p=self.read_models.marker), rows)

    def find_key(self, key_hash: str) -> KeyRecord | None:
        rows = self._fetch(self.read_models.select_key, (key_hash,))
        return key_record(rows[0]) if rows else None

    def find_admin_key(self, key_hash: str) -> AdminKeyRecord | None:
        rows = self._fetch(self.read_models.select_admin_key, (key_hash,))
        return AdminKeyRecord.from_row(rows[0]) if rows else None

    def admin_keys(self) -> list[AdminKeyRecord]:
        return [AdminKeyRecord.from_row(r) for r in self._fetch(SELECT_ADMIN_KEYS)]

    def balances(self, holding_only: bool = False) -> list[BalanceRecord]:
        return [balance_record(r) for r in self._fetch(SELECT_HOLDING if holding_only else SELECT_BALANCES)]

    def find_idempotent(self, team_id: UUID, idem_key: str) -> IdempotentResponse | None:
        """The answer stored under the key, unless it has expired."""
        rows = self._fetch(self.read_models.select_idempotent, (team_id.hex, idem_key, time.time()))
        return idempotent_response(team_id, idem_key, rows[0]) if rows else None

    def keep_idempotent(self, answer: IdempotentResponse) -> IdempotentResponse | None:
        """Keep ``answer`` under its key unless the key already has one (an expired one is replaced);
        the answer the key has afterwards, this one or the one another attempt kept first."""
        self.write_rows(DELETE_EXPIRED_IDEMPOTENT, [(answer.team_id.hex, answer.idem_key, time.time())])
        row = (
            answer.team_id.hex,
            answer.idem_key,
            answer.body_hash,
            answer.request_id,
            answer.content_type,
            answer.response,
            answer.created_at,
            answer.expires_at,
        )
        self.write_rows(KEEP_IDEMPOTENT, [row])
        return self.find_idempotent(answer.team_id, answer.idem_key)

    def charge_totals(self, team_id: UUID, upto_version: int) -> tuple[int, int]:
        """How many charges of the team the once-only index holds up to a version, and their sum."""
        row = self._fetch(self.read_models.charge_totals, (team_id.hex, upto_version))[0]
        return int(row["n"]), int(row["total"])

    def find_charge(self, team_id: UUID, request_id: str) -> ChargeRecord | None:
        rows = self._fetch(self.read_models.select_charge, (team_id.hex, request_id))
        if not rows:
            return None
        row = rows[0]
        return ChargeRecord(team_id, request_id, int(row["version"]), int(row["charged"]), int(row["balance_after"]))
