"""Proving a statement's rows are in the transparency log: ``ledger verify --statement``'s last check.

A statement of form 2 names, per entry, its event's leaf, and ends with the log checkpoint it was
made from (``projections/statement_anchor.py``). The regeneration that ``verify_statement`` does
shows the file is the statement the ledger gives *now*; this shows the ledger now is the ledger
that was, as far as the statement reaches:

1. the checkpoint is signed by the log's key (the one the caller trusts: ``--key``, or the
   configuration's own) and is of that log;
2. the log's tree at the checkpoint's size still has the root the checkpoint signed;
3. every entry's event, as the store holds it now, hashes to a leaf that an inclusion proof puts at
   the row's index in that tree, and so does the statement's last event;
4. given a checkpoint the caller kept from before (an auditor's, a witness's: ``--checkpoint``),
   the statement's checkpoint and that one are consistent: one tree extends the other.

A month rewritten in the database, with every projection, snapshot and statement regenerated and the
log rebuilt and re-signed, passes 1–3 with a statement regenerated from it (its checkpoint is the new
one); it fails 4 against any checkpoint kept from before the rewrite, and the statement the customer
holds from before fails 2 or 3. The proofs read tiles through a cache: the tiles above the leaves are
shared by every row, and 256 consecutive leaves share one, so a month of n entries costs about
n / 256 tile reads, not n proofs' worth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.store.database import Sql
from app.store.event_store import LedgerStore
from app.store.log_append import stored_leaf
from app.store.log_reads import LogReads
from domain.ledger import team_id
from domain.transparency.checkpoint import Checkpoint, MalformedCheckpoint, open_checkpoint
from domain.transparency.hashing import leaf_hash
from domain.transparency.keys import InvalidSignature, NoteVerifier, UnverifiedNote
from domain.transparency.note import MalformedNote
from domain.transparency.tile_proofs import prove_consistency, prove_inclusion, tree_root
from domain.transparency.tiles import TileCoordinate
from domain.transparency.verify import ProofError, verify_consistency, verify_inclusion
from projections.statement_anchor import SECTION as ANCHOR_SECTION
from projections.statement_chain import cell, describe

#: Stored events read at once, to recompute the entries' leaves.
EVENT_PAGE = 1000
_NOT_OPENED = (MalformedCheckpoint, MalformedNote, InvalidSignature, UnverifiedNote)


class _CachedTiles:
    """The log's tiles, each read once per check."""

    def __init__(self, reads: LogReads) -> None:
        self._reads = reads
        self._kept: dict[TileCoordinate, bytes] = {}

    def read_tiles(self, tiles: Sequence[TileCoordinate]) -> list[bytes]:
        missing = [t for t in dict.fromkeys(tiles) if t not in self._kept]
        self._kept.update(zip(missing, self._reads.read_tiles(missing), strict=True))
        if len(self._kept) > 100_000:  # a month of millions of entries: keep the memory bounded
            self._kept = {t: self._kept[t] for t in tiles}
        return [self._kept[t] for t in tiles]


@dataclass(frozen=True, slots=True)
class StatementProof:
    """What proving a statement against the log found: ``problem`` is None when every row is in it."""

    problem: str | None = None
    checkpoint_size: int = 0
    rows_proven: int = 0
    trusted_size: int | None = None  # the size of the caller's own checkpoint it is consistent with


def prove_statement(
    rows: Sequence[dict[str, Any]],
    where: Sequence[str],
    team: str,
    store: LedgerStore,
    log_key: NoteVerifier,
    trusted: bytes | None = None,
) -> StatementProof:
    """Steps 1–4 of the module's docstring, for a statement's ``rows`` (as read from its file)."""
    anchor = next((row for row in rows if row.get("section") == ANCHOR_SECTION), None)
    if anchor is None or cell(anchor.get("count")) == "":
        said = cell(anchor.get("note")) if anchor is not None else "it has no log_checkpoint row"
        return StatementProof(f"the statement is not anchored to the log ({said})")
    try:
        checkpoint = open_checkpoint(cell(anchor.get("note")).encode(), log_key.name, [log_key])
    except _NOT_OPENED as exc:
        return StatementProof(f"the log checkpoint it names is not one of {log_key.name}'s, signed by its key: {exc}")
    if str(checkpoint.size) != cell(anchor.get("count")):
        return StatementProof(
            f"its log_checkpoint row says size {cell(anchor.get('count'))}, its checkpoint {checkpoint.size}"
        )
    kept: Checkpoint | None = None
    if trusted is not None:
        try:
            kept = open_checkpoint(trusted, log_key.name, [log_key])
        except _NOT_OPENED as exc:
            return StatementProof(f"--checkpoint is not a checkpoint of {log_key.name}, signed by its key: {exc}")
    sql = Sql(store.database)
    try:
        with sql.snapshot():  # every tile from one state of the log
            tiles = _CachedTiles(LogReads(sql))
            problem = _same_tree(tiles, checkpoint) or _rows_included(rows, where, team, store, tiles, checkpoint)
            if problem is None and kept is not None:
                problem = _consistent(tiles, checkpoint, kept)
    finally:
        sql.close()
    proven = sum(row.get("section") == "entry" for row in rows)
    return StatementProof(problem, checkpoint.size, 0 if problem else proven, None if kept is None else kept.size)


def _same_tree(tiles: _CachedTiles, checkpoint: Checkpoint) -> str | None:
    try:
        root = tree_root(tiles, checkpoint.size)
    except ValueError as exc:  # the log is shorter than the checkpoint: cut
        return f"the log no longer has the tree of checkpoint {checkpoint.size} the statement names: {exc}"
    if root != checkpoint.root_hash:
        return (
            f"the log's tree of {checkpoint.size} leaves is not the one the statement's checkpoint signed (its root "
            "differs): the log was rewritten after the statement was made"
        )
    return None


def _rows_included(
    rows: Sequence[dict[str, Any]],
    where: Sequence[str],
    team: str,
    store: LedgerStore,
    tiles: _CachedTiles,
    checkpoint: Checkpoint,
) -> str | None:
    """Each entry's event, and the statement's last, proven at its leaf in the checkpoint's tree."""
    anchor = next(row for row in rows if row.get("section") == ANCHOR_SECTION)
    closing = next(row for row in rows if row.get("section") == "closing_balance")
    wanted: list[tuple[int, int, str]] = []  # version, leaf, the row as a person finds it
    for index, row in enumerate(rows):
        if row.get("section") == "entry":
            wanted.append(
                (int(cell(row.get("version"))), _leaf(row), f"row {index + 1} ({where[index]}), {describe(row)}")
            )
    wanted.append(
        (int(cell(closing.get("version"))), _leaf(anchor), "the statement's last event (its log_checkpoint row)")
    )
    events = _stored_events(store, team, sorted({version for version, _, _ in wanted}))
    for version, leaf, what in wanted:
        stored = events.get(version)
        if leaf < 0 or leaf >= checkpoint.size:
            return f"{what}: its leaf {leaf} is not in the checkpoint's tree of {checkpoint.size} leaves"
        if stored is None:
            return f"{what}: the ledger has no event at version {version}"
        try:
            verify_inclusion(
                leaf,
                checkpoint.size,
                leaf_hash(stored_leaf(stored)),
                prove_inclusion(tiles, leaf, checkpoint.size),
                checkpoint.root_hash,
            )
        except (ProofError, ValueError):
            return (
                f"{what}: its event (version {version}) as the ledger holds it is not leaf {leaf} of the "
                f"checkpoint's tree: it was changed after it was logged"
            )
    return None


def _leaf(row: dict[str, Any]) -> int:
    try:
        return int(cell(row.get("leaf")))
    except ValueError:
        return -1


def _stored_events(store: LedgerStore, team: str, versions: list[int]) -> dict[int, Any]:
    """The team's stored events at ``versions`` (ascending), read a page at a time."""
    found: dict[int, Any] = {}
    if not versions:
        return found
    wanted = set(versions)
    after, last = versions[0] - 1, versions[-1]
    while after < last:
        page = list(store.recorder.select_events(team_id(team), gt=after, lte=last, limit=EVENT_PAGE))
        found.update((s.originator_version, s) for s in page if s.originator_version in wanted)
        if len(page) < EVENT_PAGE:
            break
        after = page[-1].originator_version
    return found


def _consistent(tiles: _CachedTiles, statement: Checkpoint, kept: Checkpoint) -> str | None:
    """Whether the statement's checkpoint and the caller's own are of one log, one extending the other."""
    old, new = sorted((statement, kept), key=lambda c: c.size)
    try:
        proof = prove_consistency(tiles, old.size, new.size) if old.size < new.size else ()
        if old.size == new.size and old.root_hash != new.root_hash:
            raise ProofError("two different trees of one size")
        verify_consistency(old.size, new.size, old.root_hash, new.root_hash, proof)
    except (ProofError, ValueError) as exc:
        return (
            f"the statement's checkpoint ({statement.size} leaves) is not consistent with your checkpoint "
            f"({kept.size} leaves): the log was rewritten between them ({exc})"
        )
    return None
