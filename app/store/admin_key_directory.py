"""The admin key directory: each named admin key (``domain/admin_keys.py``) by its hash.

Written in the transaction of the key's ``AdminKeyIssued`` / ``AdminKeyRevoked`` event (like the
team keys' directory), so a key is usable the moment its issue is committed, and refused the moment
its revocation is; rebuilt from the events by ``tollgate ledger rebuild``, and checked against them
by ``tollgate ledger verify``. Only hashes are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from domain.admin_keys import AdminKey, AdminKeys

ADMIN_KEY_COLUMNS = ("key_hash", "key_id", "name", "role", "revoked", "issued_at", "issued_by", "version")
UPSERT_ADMIN_KEY = (
    f"INSERT INTO admin_keys ({', '.join(ADMIN_KEY_COLUMNS)}) VALUES ({', '.join(['{p}'] * len(ADMIN_KEY_COLUMNS))}) "
    f"ON CONFLICT (key_hash) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in ADMIN_KEY_COLUMNS[1:])} "
    "WHERE admin_keys.version < excluded.version"
)
SELECT_ADMIN_KEY = f"SELECT {', '.join(ADMIN_KEY_COLUMNS)} FROM admin_keys WHERE key_hash = {{p}}"
SELECT_ADMIN_KEYS = f"SELECT {', '.join(ADMIN_KEY_COLUMNS)} FROM admin_keys ORDER BY issued_at, key_id"


@dataclass(frozen=True, slots=True)
class AdminKeyRecord:
    """What the admin API needs to know of a presented admin key: whose it is, and its role."""

    key_hash: str
    key_id: str
    name: str
    role: str
    revoked: bool
    issued_at: str
    issued_by: str
    version: int

    @classmethod
    def of(cls, key: AdminKey) -> AdminKeyRecord:
        return cls(
            key.key_hash,
            key.key_id,
            key.name,
            key.role,
            key.revoked,
            key.issued_at.isoformat(),
            key.issued_by,
            key.version,
        )

    @classmethod
    def from_row(cls, row: Any) -> AdminKeyRecord:
        return cls(
            row["key_hash"],
            row["key_id"],
            row["name"],
            row["role"],
            bool(row["revoked"]),
            row["issued_at"],
            row["issued_by"],
            int(row["version"]),
        )

    def as_row(self) -> tuple[Any, ...]:
        return (
            self.key_hash,
            self.key_id,
            self.name,
            self.role,
            int(self.revoked),
            self.issued_at,
            self.issued_by,
            self.version,
        )


def records_of(keys: AdminKeys | None) -> list[AdminKeyRecord]:
    """The directory's rows the admin keys' state implies."""
    return [AdminKeyRecord.of(key) for key in keys.keys.values()] if keys is not None else []


def directory_problems(rows: list[AdminKeyRecord], keys: AdminKeys | None) -> list[str]:
    """How the directory's rows differ from the replayed admin keys (a row added, changed or missing
    would let a key in that the events never issued, or keep one in that they revoked). A row newer
    than the replay (a key issued or revoked since it read the events) is left to the next check."""
    expected = {r.key_hash: r for r in records_of(keys)}
    replayed = keys.version if keys is not None else 0
    problems = []
    for row in rows:
        if row.version > replayed:
            expected.pop(row.key_hash, None)
            continue
        wanted = expected.pop(row.key_hash, None)
        if wanted is None:
            problems.append(f"admin key directory has key {row.key_id!r}, which no event issued")
        elif wanted != row:
            problems.append(f"admin key directory row of {row.key_id!r} differs from its events: {row} != {wanted}")
    problems += [f"admin key directory is missing key {r.key_id!r}" for r in expected.values()]
    return problems
