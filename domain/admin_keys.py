"""Named admin keys: who may use the admin API, in which role, as facts in the ledger.

One shared admin key cannot say who added credits or revoked a key. Each operator and each auditor
gets a key of their own instead, issued and revoked by ``tollgate admin-key``; the events that
their requests cause then name it (``admin:<key id>``). A key's role says what it may do:

- ``auditor`` reads everything the admin API offers (teams, balances, history, usage, exports,
  prices, metrics) and changes nothing;
- ``operator`` may also change things (teams, keys, credits, limits, prices).

Like the price list, one aggregate (a fixed id, no team) holds every admin key: they are few, and
issued or revoked rarely. Only a key's hash is recorded; its secret is shown once, when issued.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate

from domain.ledger_errors import KeyNotFound, LedgerError

#: The admin keys' aggregate id: one per ledger.
ADMIN_KEYS_ID = uuid5(NAMESPACE_URL, "tollgate:admin-keys")
AUDITOR = "auditor"
OPERATOR = "operator"
ROLES = (AUDITOR, OPERATOR)
#: An admin key's name: a person or a tool, as the audit history shows it.
ADMIN_KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")


class AdminKeyNotFound(KeyNotFound):
    def __init__(self, key_id: str) -> None:
        LedgerError.__init__(self, f"there is no admin key {key_id!r}")


@dataclass(frozen=True, slots=True)
class AdminKey:
    """An admin key as its events make it."""

    key_id: str
    key_hash: str
    name: str
    role: str
    issued_at: datetime
    issued_by: str
    revoked: bool = False
    version: int = 0  # the aggregate's version that last changed it


class AdminKeys(Aggregate):
    """Every admin key ever issued, revoked ones included (their ids stay in the audit history)."""

    class Started(Aggregate.Created):
        pass

    class AdminKeyIssued(Aggregate.Event):
        key_id: str
        key_hash: str
        name: str
        role: str
        actor: str = ""
        reason: str = ""

        def apply(self, keys: AdminKeys) -> None:
            keys.keys[self.key_id] = AdminKey(
                self.key_id,
                self.key_hash,
                self.name,
                self.role,
                self.timestamp,
                self.actor,
                False,
                self.originator_version,
            )

    class AdminKeyRevoked(Aggregate.Event):
        key_id: str
        actor: str = ""
        reason: str = ""

        def apply(self, keys: AdminKeys) -> None:
            key = keys.keys[self.key_id]
            keys.keys[self.key_id] = AdminKey(
                key.key_id,
                key.key_hash,
                key.name,
                key.role,
                key.issued_at,
                key.issued_by,
                True,
                self.originator_version,
            )

    @staticmethod
    def create_id() -> UUID:
        return ADMIN_KEYS_ID

    def __init__(self) -> None:
        self.keys: dict[str, AdminKey] = {}

    @classmethod
    def start(cls) -> AdminKeys:
        return cls()

    def issue(self, key_id: str, key_hash: str, name: str, role: str, *, actor: str, reason: str = "") -> None:
        """Record a new key; its name is unique among the keys in force, so the history reads plainly."""
        if role not in ROLES:
            raise LedgerError(f"an admin key's role is one of {', '.join(ROLES)}, not {role!r}")
        if not ADMIN_KEY_NAME.fullmatch(name):
            raise LedgerError(f"an admin key's name is 1 to 64 letters, digits, '_', '.', '@' or '-', got {name!r}")
        if key_id in self.keys:
            raise LedgerError(f"admin key id {key_id!r} is already issued")
        if any(k.name == name and not k.revoked for k in self.keys.values()):
            raise LedgerError(f"an admin key named {name!r} is already in force: revoke it first")
        self.trigger_event(
            self.AdminKeyIssued, key_id=key_id, key_hash=key_hash, name=name, role=role, actor=actor, reason=reason
        )

    def revoke(self, key_id: str, *, actor: str, reason: str = "") -> None:
        key = self.keys.get(key_id)
        if key is None:
            raise AdminKeyNotFound(key_id)
        if key.revoked:
            raise LedgerError(f"admin key {key_id!r} is already revoked")
        self.trigger_event(self.AdminKeyRevoked, key_id=key_id, actor=actor, reason=reason)
