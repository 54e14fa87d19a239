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
from uuid import UUID

from projections.event_store import LedgerStore

KEY_PREFIX = "tg-"


@dataclass(frozen=True, slots=True)
class NewKey:
    secret: str
    key_id: str
    key_hash: str


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request is billed to."""

    team_id: UUID
    team_name: str
    key_id: str


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_key() -> NewKey:
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    key_hash = hash_key(secret)
    return NewKey(secret=secret, key_id="key_" + key_hash[:12], key_hash=key_hash)


class KeyDirectory:
    """Resolves presented keys to principals, remembering the ones it has seen.

    A key issued by another process (the CLI) is found on first use: a miss reads the key
    directory table, which is written in the same transaction as the ``KeyIssued`` event.
    """

    def __init__(self, store: LedgerStore) -> None:
        self._store = store
        self._known: dict[str, Principal] = {}

    async def principal_for(self, secret: str) -> Principal | None:
        key_hash = hash_key(secret)
        principal = self._known.get(key_hash)
        if principal is not None:
            return principal
        record = await asyncio.to_thread(self._store.find_key, key_hash)
        if record is None or record.revoked:
            return None
        principal = Principal(record.team_id, record.team_name, record.key_id)
        self._known[key_hash] = principal
        return principal
