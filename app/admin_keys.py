"""Named admin keys: issuing and revoking them, and telling who presented one.

Like team keys, an admin key is a 256-bit random secret stored only as its SHA-256 hash
(``app/keys.py`` says why a fast hash is enough); it starts with ``tga-`` so it is told apart from a
team's ``tg-`` key at a glance. Each gateway process remembers the keys it has seen for at most
:data:`REMEMBER_SECONDS`, and forgets one at once when its projector sees it revoked, so a revoked
key stops working in every process within a second.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from eventsourcing.persistence import PersistenceError

from app.errors import ServiceUnavailable
from app.keys import hash_key
from app.store.admin_key_directory import AdminKeyRecord
from app.store.event_store import LedgerStore
from app.store.store_errors import VersionConflict
from domain.admin_keys import OPERATOR, AdminKeys

ADMIN_KEY_PREFIX = "tga-"
#: How long a process trusts what it read of an admin key (its projector forgets a revoked one sooner).
REMEMBER_SECONDS = 0.5
#: Tries of an issue or a revocation that another process's change of the admin keys got in before.
_TRIES = 5


@dataclass(frozen=True, slots=True)
class AdminIdentity:
    """Who is using the admin API, in which role, and how the events they cause name them."""

    key_id: str
    name: str
    role: str

    @property
    def actor(self) -> str:
        return f"admin:{self.key_id}"


#: The configured shared admin key (``admin_key_env``): an operator, named ``admin:config``.
CONFIG_ADMIN = AdminIdentity("config", "the configured admin key", OPERATOR)


@dataclass(frozen=True, slots=True)
class IssuedAdminKey:
    key_id: str
    secret: str  # shown once


def new_admin_key() -> tuple[str, str, str]:
    """A fresh secret, its key id and its hash."""
    secret = ADMIN_KEY_PREFIX + secrets.token_urlsafe(32)
    key_hash = hash_key(secret)
    return secret, "adm_" + key_hash[:12], key_hash


def _changed(store: LedgerStore, change: Callable[[AdminKeys], None]) -> None:
    """Apply ``change`` to the admin keys and save, again on the newest admin keys if another
    process changed them meanwhile."""
    for attempt in range(_TRIES):
        keys = store.load_admin_keys() or AdminKeys.start()
        change(keys)
        try:
            store.save_admin_keys(keys)
            return
        except VersionConflict:
            if attempt == _TRIES - 1:
                raise


def issue_admin_key(store: LedgerStore, name: str, role: str, *, actor: str, reason: str = "") -> IssuedAdminKey:
    """Record a new admin key (its directory row in the same transaction); its secret is in the answer only."""
    secret, key_id, key_hash = new_admin_key()
    _changed(store, lambda keys: keys.issue(key_id, key_hash, name, role, actor=actor, reason=reason))
    return IssuedAdminKey(key_id, secret)


def revoke_admin_key(store: LedgerStore, key_id: str, *, actor: str, reason: str = "") -> None:
    _changed(store, lambda keys: keys.revoke(key_id, actor=actor, reason=reason))


class AdminKeyDirectory:
    """Resolves a presented admin key to who holds it: an :class:`AdminIdentity`, ``None`` for a
    key that is no admin key, or the revoked key's record."""

    def __init__(self, store: LedgerStore) -> None:
        self._store = store
        self._known: dict[str, tuple[float, AdminKeyRecord | None]] = {}  # hash → (read at, row)

    def forget(self, key_id: str) -> None:
        """The key changed somewhere (its projector saw it): read it afresh next time."""
        for key_hash, (_, record) in list(self._known.items()):
            if record is not None and record.key_id == key_id:
                del self._known[key_hash]

    async def record_for(self, secret: str) -> AdminKeyRecord | None:
        key_hash = hash_key(secret)
        now = time.monotonic()
        known = self._known.get(key_hash)
        if known is not None and now - known[0] < REMEMBER_SECONDS:
            return known[1]
        try:
            record = await asyncio.to_thread(self._store.find_admin_key, key_hash)
        except PersistenceError:
            raise ServiceUnavailable(
                "The admin key directory cannot be read right now (the database is unavailable). Retry shortly.",
                headers={"retry-after": "1"},
            ) from None
        if len(self._known) > 1000:  # unknown keys are remembered too: bounded, whatever is presented
            self._known.clear()
        self._known[key_hash] = (now, record)
        return record
