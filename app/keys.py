"""API keys: how they are made, and how a presented key is matched to its team.

Keys are 256-bit random secrets, so a fast hash (SHA-256) is enough to store them safely — there is
nothing to brute-force — and it keeps authentication cheap on the hot path. Only the hash is ever
stored; the key itself is shown once, when it is issued.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from dataclasses import dataclass
from decimal import Decimal
from uuid import UUID

from eventsourcing.persistence import PersistenceError

from app.errors import ServiceUnavailable
from app.store.event_store import LedgerStore
from app.store.read_models import KeyRecord

KEY_PREFIX = "tg-"
_NO_ADJUSTMENT = Decimal(0)


@dataclass(frozen=True, slots=True)
class NewKey:
    secret: str
    key_id: str
    key_hash: str


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request is billed to, and what its key may use."""

    team_id: UUID
    team_name: str
    key_id: str
    models: tuple[str, ...] = ()  # empty: any model
    endpoints: tuple[str, ...] = ()  # empty: any endpoint
    suspended: bool = False  # the team's
    key_rpm: int | None = None
    key_tpm: int | None = None
    team_rpm: int | None = None
    team_tpm: int | None = None
    clamp_output: bool = False  # a request its balance cannot cover gets what it covers instead of 402
    price_adjustments: tuple[tuple[str, str], ...] = ()  # the team's, (model or "", percent)
    budgeted: bool = False  # the key has a budget: each request is held in the ledger, never against a lease

    def adjustment_for(self, model_id: str) -> Decimal:
        """The team's price adjustment for the model, in percent (0: none)."""
        if not self.price_adjustments:
            return _NO_ADJUSTMENT
        adjustments = dict(self.price_adjustments)
        return Decimal(adjustments.get(model_id) or adjustments.get("") or 0)

    def may_use(self, model_id: str) -> bool:
        return not self.models or model_id in self.models

    def may_call(self, endpoint: str) -> bool:
        return not self.endpoints or endpoint in self.endpoints

    @classmethod
    def of(cls, record: KeyRecord) -> Principal:
        return cls(
            record.team_id,
            record.team_name,
            record.key_id,
            record.models,
            record.endpoints,
            record.suspended,
            record.key_rpm,
            record.key_tpm,
            record.team_rpm,
            record.team_tpm,
            record.clamp_output,
            record.price_adjustments,
            record.budgeted,
        )


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_key() -> NewKey:
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    key_hash = hash_key(secret)
    return NewKey(secret=secret, key_id="key_" + key_hash[:12], key_hash=key_hash)


class KeyDirectory:
    """Resolves presented keys to principals, remembering the ones it has seen.

    A key issued by another process (the CLI) is found on first use: a miss reads the key
    directory table, which is written in the same transaction as the ``KeyIssued`` event. A key
    revoked, restricted or limited anywhere — or whose team was suspended or limited — is forgotten
    here as soon as this process's projector sees the event (:meth:`forget`, :meth:`forget_team`),
    so the next request reads its new state. A key that must be read while the database is away
    gets 503, like every billed request then: the gateway cannot tell whether it is valid.
    """

    def __init__(self, store: LedgerStore) -> None:
        self._store = store
        self._known: dict[str, Principal] = {}
        self._hash_of: dict[str, str] = {}

    def forget(self, key_id: str) -> None:
        key_hash = self._hash_of.pop(key_id, None)
        if key_hash is not None:
            self._known.pop(key_hash, None)

    def forget_team(self, team_id: UUID) -> None:
        """The team's policy changed (suspension, limits): every key of it is read afresh."""
        for principal in list(self._known.values()):
            if principal.team_id == team_id:
                self.forget(principal.key_id)

    def known(self, secret: str) -> Principal | None:
        """The key's principal if this process has it already (no I/O), else None."""
        return self._known.get(hash_key(secret))

    async def principal_for(self, secret: str) -> Principal | None:
        key_hash = hash_key(secret)
        principal = self._known.get(key_hash)
        if principal is not None:
            return principal
        try:
            record = await asyncio.to_thread(self._store.find_key, key_hash)
        except PersistenceError:  # the database is away: the documented, retryable 503 of an outage
            raise ServiceUnavailable(
                "The key directory cannot be read right now (the database is unavailable); "
                "nothing was charged. Retry shortly.",
                headers={"retry-after": "1"},
            ) from None
        if record is None or record.revoked:
            return None
        principal = Principal.of(record)
        self._known[key_hash] = principal
        self._hash_of[record.key_id] = key_hash
        return principal
