"""``ledger verify``'s check of the transparency log: the whole log recomputed from the events.

The events are read once, in the order they were stored (``verify_ledger``'s pass); the log appends
them in that very order (in the event's transaction: ``app/store/log_append.py``), so event ``i`` must
be leaf ``i``. For each, the check recomputes its leaf hash from the stored event and compares it with
the hash the log's tiles hold, and rebuilds the tree as it goes: every kept checkpoint must state the
root of the tree of its size, and the log's stored size and root (read before the events) must be the
tree's at that size. So an event whose data was changed in the database after it was logged, an event
missing from the log or logged twice, the newest events deleted, a rewritten tile, a checkpoint that
no tree of its size has: each is a problem, named. Events written while the check reads are checked
as leaves too, beyond the size it read first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eventsourcing.persistence import Notification, StoredEvent

from app.store.database import Sql
from app.store.event_store import LedgerStore
from app.store.log_append import stored_leaf
from app.store.log_reads import KeptCheckpoint, LogReads
from domain.transparency.appender import EMPTY_EDGE, append_leaves
from domain.transparency.checkpoint import MalformedCheckpoint, parse_checkpoint
from domain.transparency.hashing import HASH_SIZE, leaf_hash
from domain.transparency.note import MalformedNote, parse_note
from domain.transparency.tiles import TILE_WIDTH, TileCoordinate

PAGE = 1024
#: Problems reported at most (a rewritten month would otherwise list every event of it).
MAX_PROBLEMS = 10


@dataclass
class LogCheck:
    """Fed every stored event in order (:meth:`expect`), then :meth:`finish`: the problems found."""

    store: LedgerStore
    problems: list[str] = field(default_factory=list)
    leaves: int = 0
    checkpoints: int = 0

    def __post_init__(self) -> None:
        self._sql = Sql(self.store.database)
        self._reads = LogReads(self._sql)
        # checkpoints first: each is then at most the head's size, however the log grows meanwhile
        self._kept = sorted(self._reads.all_checkpoints(), key=lambda k: k.size)
        self._head = self._reads.head()
        self._edge = EMPTY_EDGE
        self._batch: list[tuple[Notification, bytes]] = []

    def expect(self, notification: Notification) -> None:
        stored = StoredEvent(
            notification.originator_id, notification.originator_version, notification.topic, notification.state
        )
        self._batch.append((notification, leaf_hash(stored_leaf(stored))))
        if len(self._batch) >= PAGE:
            self._flush()

    def _problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(f"transparency log: {text}")

    def _flush(self) -> None:
        batch, self._batch = self._batch, []
        if not batch:
            return
        start, end = self._edge.size, self._edge.size + len(batch)
        logged = {index: (originator, version) for index, originator, version in self._reads.events(start, end)}
        stored = self._level_zero(start, min(end, self._head.size))
        for offset, (notification, computed) in enumerate(batch):
            index = start + offset
            named = (notification.originator_id, notification.originator_version)
            if logged.get(index) != named:
                self._problem(
                    f"leaf {index} should be event {named[1]} of {named[0]}; the log names {logged.get(index)}"
                )
            elif index < self._head.size and stored.get(index) != computed:
                what = f"leaf {index} (event {named[1]} of {named[0]})"
                self._problem(f"{what} is not the stored event: changed after it was logged")
        hashes = [computed for _, computed in batch]
        while hashes:  # up to each kept checkpoint's size, and the log's, in turn, checking the root there
            reach = self._edge.size + len(hashes)
            due = next((k for k in self._kept if self._edge.size < k.size <= reach), None)
            stop = due.size if due is not None else reach
            if self._edge.size < self._head.size < stop:
                due, stop = None, self._head.size
            take = stop - self._edge.size
            self._edge = append_leaves(self._edge, hashes[:take]).edge
            hashes = hashes[take:]
            if due is not None:
                self._check_checkpoint(due)
            if self._edge.size == self._head.size and self._edge.root != self._head.root:
                self._problem(f"the log's stored root at {self._head.size} leaves is not the root of its events")

    def _level_zero(self, start: int, end: int) -> dict[int, bytes]:
        """The leaf hashes the log's tiles hold for leaves ``start`` to ``end``."""
        if end <= start:
            return {}
        tiles = [
            TileCoordinate(0, t, min(TILE_WIDTH, self._head.size - t * TILE_WIDTH))
            for t in range(start // TILE_WIDTH, (end - 1) // TILE_WIDTH + 1)
        ]
        found: dict[int, bytes] = {}
        for tile, data in zip(tiles, self._reads.read_tiles(tiles), strict=True):
            for at in range(len(data) // HASH_SIZE):
                found[tile.index * TILE_WIDTH + at] = data[at * HASH_SIZE : (at + 1) * HASH_SIZE]
        return found

    def _check_checkpoint(self, kept: KeptCheckpoint) -> None:
        self.checkpoints += 1
        try:
            stated = parse_checkpoint(parse_note(kept.note.encode()).text)
        except (MalformedNote, MalformedCheckpoint) as exc:
            self._problem(f"the checkpoint kept at {kept.size} leaves is not a checkpoint: {exc}")
            return
        if (stated.size, stated.root_hash) != (kept.size, kept.root) or stated.root_hash != self._edge.root:
            self._problem(
                f"the checkpoint of {kept.size} leaves states root {stated.root_hash.hex()[:16]}…; "
                f"the events give {self._edge.root.hex()[:16]}…"
            )

    def _short_of_the_log(self) -> None:
        """The events read stop short of the log's size (read before them): the replay stopped at a
        bad event, or the newest events were deleted. The log's tree of as many leaves must be the
        events' tree, and the next leaf must name an event still stored: a truncated ledger is named."""
        size = self._edge.size
        if self._reads.root_at(size) != self._edge.root:
            self._problem(f"the log's tree of {size} leaves is not the tree of the events")
        following = self._reads.events(size, size + 1)
        if not following:
            self._problem(f"the log has {self._head.size} leaves; leaf {size} names no event")
            return
        _, originator, version = following[0]
        if not self.store.recorder.select_events(originator, gt=version - 1, lte=version):
            self._problem(
                f"the log has {self._head.size} leaves, the events stop at {size}: leaf {size} "
                f"(event {version} of {originator}) is no longer stored"
            )

    def finish(self) -> list[str]:
        try:
            self._flush()
            self.leaves = self._edge.size
            if self._edge.size < self._head.size:
                self._short_of_the_log()
        finally:
            self._sql.close()
        return self.problems
