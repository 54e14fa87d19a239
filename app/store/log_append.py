"""The transparency log in the ledger's database: every stored event appended as a leaf, in the same
transaction as the event (``domain/transparency/``, docs/transparency.md).

Three tables, all alembic's (migration 0021):

- ``log_state``: one row, the tree's size and root. An append reads it first and, on PostgreSQL,
  locks it (``FOR UPDATE``) until the transaction ends: appends from every gateway process are
  serialised there, so the log never forks and never skips a size; SQLite has one writer at a time;
- ``log_tiles``: the C2SP tiles, keyed by (level, index), each at its widest (a partial tile is
  rewritten as it grows; a full one never changes). An append reads the right edge's partial tiles
  (at most one a level), so its cost does not grow with the log;
- ``log_leaves``: which event each leaf is (its originator and version), for receipts, proofs of a
  request's charge and ``ledger verify``.

The leaf of a stored event is :func:`stored_leaf`: ``event_leaf`` of its originator id, version,
topic, instant and the rest of its stored state. A leaf whose state canonical JSON cannot carry
(never a ledger event's: a defence, not a case) is the state's bytes in hex instead, so that a log
can never refuse an event the store takes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import msgspec
from eventsourcing.persistence import StoredEvent

from app.store.many_rows import insert_rows
from domain.transparency.appender import Appended, RightEdge, append_leaves, right_edge_from_tiles
from domain.transparency.event_leaf import LeafEncodingError, event_leaf
from domain.transparency.hashing import EMPTY_ROOT, HASH_SIZE, leaf_hash
from domain.transparency.tiles import right_edge_tiles


@dataclass(frozen=True, slots=True)
class LoggedLeaf:
    """Where an event went in the log: its leaf index and hash."""

    originator_id: UUID
    version: int
    index: int
    leaf_hash: bytes


#: The instant of a leaf whose stored state says none it can be read at (a defence: never a ledger event).
UNREADABLE_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)


#: A stored state's JSON, numbers with a fraction as their text: msgspec's reading, which gives what
#: the standard library's ``json.loads(raw, parse_float=str)`` does for every state it reads (a
#: quarter of its cost); one it refuses (a byte-order mark, ``NaN``, an escaped lone surrogate, UTF-16) is
#: read by the standard library, as before.
_read_state = msgspec.json.Decoder(float_hook=str).decode


def _state_of(raw: bytes) -> Any:
    try:
        return _read_state(raw)
    except ValueError:  # msgspec's DecodeError, or bytes that are not UTF-8 (the standard library also reads UTF-16)
        return json.loads(raw, parse_float=str)


def stored_leaf(stored: StoredEvent) -> bytes:
    """The leaf bytes of a stored event (its state as the store keeps it, numbers with a fraction
    carried as their text). A state that is not a JSON object with a timestamp, or that canonical
    JSON cannot carry, is logged as its bytes in hex at the Unix epoch: the log never refuses what
    the store takes, and still binds the exact bytes."""
    raw = bytes(stored.state)
    team = str(stored.originator_id)
    try:
        state = _state_of(raw)
        stamp = state.pop("timestamp")
        instant = datetime.fromisoformat(stamp["_data_"])
        return event_leaf(team, stored.originator_version, stored.topic, instant, state)
    except (ValueError, KeyError, TypeError, AttributeError, LeafEncodingError):
        data = {"state_hex": raw.hex()}
        return event_leaf(team, stored.originator_version, stored.topic, UNREADABLE_INSTANT, data)


def _uuid(value: UUID | str) -> UUID:
    return value if isinstance(value, UUID) else UUID(value)


def _value(row: Any, name: str, at: int) -> Any:
    return row[name] if isinstance(row, dict) else row[at]


@dataclass(frozen=True, slots=True)
class _KnownEdge:
    """The right edge this writer's last append left, with its root."""

    edge: RightEdge
    root: bytes


class LogWriter:
    """Appends a batch's events to the log with a DB-API cursor, in the caller's transaction.

    It keeps the right edge its last append left: rebuilt from the partial tiles, the edge costs up to
    255 node hashes a tile level and a read of the tiles, about a quarter of a charge's CPU in the
    ledger writer (callgrind, docs/performance.md). The kept edge is used only when the stored size
    *and root* are the ones it left — the root binds every leaf, so a transaction that was rolled back,
    or another process's (or database's) appends since, even to the same size, make it rebuild."""

    def __init__(self, marker: str, *, lock_rows: bool) -> None:
        self.marker = marker
        self._lock = " FOR UPDATE" if lock_rows else ""
        #: Replaced whole (never changed in place), so a writer shared by threads reads one or the other.
        self._known: _KnownEdge | None = None

    @staticmethod
    def leaf_hashes(stored_events: Sequence[StoredEvent]) -> list[bytes]:
        """The events' leaf hashes (about 40 µs a charge): the recorders compute them before their
        transaction, so that no lock is held meanwhile (on PostgreSQL the events table's, which every
        process's saves wait for)."""
        return [leaf_hash(stored_leaf(s)) for s in stored_events]

    def append(
        self, cursor: Any, stored_events: Sequence[StoredEvent], hashes: Sequence[bytes] | None = None
    ) -> list[LoggedLeaf]:
        """Append the events, in order (``hashes``: their :meth:`leaf_hashes`, else computed here);
        returns each one's leaf."""
        if not stored_events:
            return []
        hashes = self.leaf_hashes(stored_events) if hashes is None else hashes
        if len(hashes) != len(stored_events):
            raise ValueError(f"{len(hashes)} leaf hashes for {len(stored_events)} events")
        p = self.marker
        cursor.execute(f"SELECT size, root FROM log_state WHERE id = 1{self._lock}")
        row = cursor.fetchone()
        if row is None:  # the log's first append (migration 0021 makes its tables; its row, the first append)
            cursor.execute(
                f"INSERT INTO log_state (id, size, root) VALUES (1, 0, {p}) ON CONFLICT (id) DO NOTHING", (EMPTY_ROOT,)
            )
            cursor.execute(f"SELECT size, root FROM log_state WHERE id = 1{self._lock}")
            row = cursor.fetchone()
        size, root = int(_value(row, "size", 0)), bytes(_value(row, "root", 1))
        appended = append_leaves(self._edge_at(cursor, size, root), hashes)
        self._write(cursor, size, appended, stored_events)
        self._known = _KnownEdge(appended.edge, appended.root)
        return [
            LoggedLeaf(_uuid(s.originator_id), s.originator_version, size + i, h)
            for i, (s, h) in enumerate(zip(stored_events, hashes, strict=True))
        ]

    def _edge_at(self, cursor: Any, size: int, root: bytes) -> RightEdge:
        """The right edge of the stored tree of ``size`` leaves and this root: the kept one if it is
        that tree's, else rebuilt from the stored tiles."""
        known = self._known
        if known is not None and known.edge.size == size and known.root == root:
            return known.edge
        return right_edge_from_tiles(size, self._edge_tiles(cursor, size))

    def _edge_tiles(self, cursor: Any, size: int) -> list[bytes | None]:
        wanted = right_edge_tiles(size)
        keys = [(t.level, t.index) for t in wanted if t is not None]
        found: dict[tuple[int, int], bytes] = {}
        if keys:
            p = self.marker
            where = " OR ".join(f"(level = {p} AND tile_index = {p})" for _ in keys)
            cursor.execute(
                f"SELECT level, tile_index, hashes FROM log_tiles WHERE {where}", [v for k in keys for v in k]
            )
            for row in cursor.fetchall():
                key = (int(_value(row, "level", 0)), int(_value(row, "tile_index", 1)))
                found[key] = bytes(_value(row, "hashes", 2))
        return [None if t is None else found.get((t.level, t.index), b"")[: t.width * HASH_SIZE] for t in wanted]

    def _write(self, cursor: Any, size: int, appended: Appended, stored_events: Sequence[StoredEvent]) -> None:
        p = self.marker
        for update in appended.tiles:
            cursor.execute(
                f"INSERT INTO log_tiles (level, tile_index, hashes) VALUES ({p}, {p}, {p}) "
                "ON CONFLICT (level, tile_index) DO UPDATE SET hashes = excluded.hashes",
                (update.tile.level, update.tile.index, update.data),
            )
        insert_rows(
            cursor,
            "INSERT INTO log_leaves (leaf_index, originator_id, originator_version)",
            [(size + i, _uuid(s.originator_id).hex, s.originator_version) for i, s in enumerate(stored_events)],
            marker=p,
        )
        cursor.execute(f"UPDATE log_state SET size = {p}, root = {p} WHERE id = 1", (appended.edge.size, appended.root))
