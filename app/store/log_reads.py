"""Reading the transparency log from the ledger's database: its size and root, proofs from its tiles
(O(log n) tile reads, one query each: ``domain/transparency/tile_proofs.py``), which event a leaf is,
and the checkpoints signed with their witnesses' cosignatures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from app.store.database import Sql
from domain.transparency.hashing import EMPTY_ROOT, HASH_SIZE
from domain.transparency.tile_proofs import leaf_plan, prove_consistency, prove_inclusion, tree_root
from domain.transparency.tiles import TileCoordinate

#: The one-key advisory lock of signing a checkpoint ("TollChkp"; the verify run's is "TollVeri").
CHECKPOINT_LOCK = int.from_bytes(b"TollChkp", "big")


@dataclass(frozen=True, slots=True)
class LogHead:
    """The log as it stands: its size and root."""

    size: int
    root: bytes


@dataclass(frozen=True, slots=True)
class KeptCheckpoint:
    """A checkpoint the gateway signed, and when."""

    size: int
    root: bytes
    note: str
    signed_at: str


class LogReads:
    """The log's tables, read (and its checkpoints and cosignatures, written) with one connection."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    # -- the tree ------------------------------------------------------------------------------

    def head(self) -> LogHead:
        rows = self._sql.query("SELECT size, root FROM log_state WHERE id = 1")
        return LogHead(int(rows[0]["size"]), bytes(rows[0]["root"])) if rows else LogHead(0, EMPTY_ROOT)

    def read_tiles(self, tiles: Sequence[TileCoordinate]) -> list[bytes]:
        """The tiles' bytes, each cut to the width asked (a stored tile is at its widest)."""
        if not tiles:
            return []
        where = " OR ".join("(level = ? AND tile_index = ?)" for _ in tiles)
        rows = self._sql.query(
            f"SELECT level, tile_index, hashes FROM log_tiles WHERE {where}",
            [v for t in tiles for v in (t.level, t.index)],
        )
        found = {(int(r["level"]), int(r["tile_index"])): bytes(r["hashes"]) for r in rows}
        return [found.get((t.level, t.index), b"")[: t.width * HASH_SIZE] for t in tiles]

    def inclusion(self, index: int, size: int) -> tuple[bytes, ...]:
        return prove_inclusion(self, index, size)

    def consistency(self, old_size: int, new_size: int) -> tuple[bytes, ...]:
        return prove_consistency(self, old_size, new_size)

    def root_at(self, size: int) -> bytes:
        return tree_root(self, size)

    def leaf_hash(self, index: int, size: int) -> bytes:
        """The hash of leaf ``index``, as the tree of ``size`` leaves stores it."""
        plan = leaf_plan(index, size)
        return plan.resolve(self.read_tiles(plan.tiles))[0]

    # -- which event each leaf is ----------------------------------------------------------------

    def leaf_of(self, originator_id: UUID, version: int) -> int | None:
        rows = self._sql.query(
            "SELECT leaf_index FROM log_leaves WHERE originator_id = ? AND originator_version = ?",
            [originator_id.hex, version],
        )
        return int(rows[0]["leaf_index"]) if rows else None

    def events(self, start: int, end: int) -> list[tuple[int, UUID, int]]:
        """The leaves ``start`` to ``end`` (excluded): each one's index, originator and version."""
        rows = self._sql.query(
            "SELECT leaf_index, originator_id, originator_version FROM log_leaves "
            "WHERE leaf_index >= ? AND leaf_index < ? ORDER BY leaf_index",
            [start, end],
        )
        return [(int(r["leaf_index"]), UUID(str(r["originator_id"])), int(r["originator_version"])) for r in rows]

    # -- checkpoints and cosignatures ------------------------------------------------------------

    def sign_in_turn(
        self, sign: Callable[[LogHead, KeptCheckpoint | None], KeptCheckpoint | None]
    ) -> KeptCheckpoint | None:
        """One process at a time, ``sign`` decides from the log's head and its latest kept checkpoint
        whether to sign a new one, which is then kept in the same transaction; returns it (None:
        nothing signed). The turn is PostgreSQL's transaction advisory lock :data:`CHECKPOINT_LOCK`,
        tried, not waited for (a process that finds it taken signs nothing this time: another is
        signing), or SQLite's write lock. Each process then sees the checkpoint the one before it kept."""
        with self._sql.transaction() as tx:
            if self._sql.kind != "sqlite":
                (turn,) = self._sql.query("SELECT pg_try_advisory_xact_lock(?) AS got", [CHECKPOINT_LOCK])
                if not turn["got"]:
                    return None
            kept = sign(self.head(), self.latest_checkpoint())
            if kept is not None:  # the same size signed again is the same note (Ed25519 is deterministic)
                tx.execute(
                    "INSERT INTO log_checkpoints (size, root, note, signed_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (size) DO NOTHING",
                    (kept.size, kept.root, kept.note, kept.signed_at),
                )
            return kept

    def latest_checkpoint(self) -> KeptCheckpoint | None:
        rows = self._sql.query("SELECT * FROM log_checkpoints ORDER BY size DESC LIMIT 1")
        return _kept(rows[0]) if rows else None

    def checkpoints_after(self, size: int, limit: int = 1000) -> list[KeptCheckpoint]:
        rows = self._sql.query(f"SELECT * FROM log_checkpoints WHERE size > ? ORDER BY size LIMIT {int(limit)}", [size])
        return [_kept(r) for r in rows]

    def checkpoint_at(self, size: int) -> KeptCheckpoint | None:
        rows = self._sql.query("SELECT * FROM log_checkpoints WHERE size = ?", [size])
        return _kept(rows[0]) if rows else None

    def all_checkpoints(self) -> list[KeptCheckpoint]:
        return [_kept(r) for r in self._sql.query("SELECT * FROM log_checkpoints ORDER BY size")]

    def keep_cosignature(self, size: int, witness: str, line: str, cosigned_at: int) -> None:
        """A witness's cosignature line of the checkpoint at ``size`` (its latest replaces an older one)."""
        with self._sql.transaction() as tx:
            tx.execute(
                "INSERT INTO log_cosignatures (size, witness, line, cosigned_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (size, witness) DO UPDATE SET line = excluded.line, cosigned_at = excluded.cosigned_at",
                (size, witness, line, cosigned_at),
            )

    def cosignatures(self, size: int) -> list[str]:
        rows = self._sql.query("SELECT line FROM log_cosignatures WHERE size = ? ORDER BY witness", [size])
        return [str(r["line"]) for r in rows]


def _kept(row: dict[str, Any]) -> KeptCheckpoint:
    return KeptCheckpoint(int(row["size"]), bytes(row["root"]), str(row["note"]), str(row["signed_at"]))
