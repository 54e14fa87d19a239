"""What ties a monthly statement to the transparency log: each entry's leaf, and the checkpoint.

A statement of form 2 (``projections/statement_chain.py``) gives each entry the index of its event's
leaf in the log, and ends with the ``log_checkpoint`` row: the first checkpoint the gateway kept whose
tree holds the statement's last event (its closing version's leaf), as signed. "The first" makes the
choice deterministic: checkpoints are only ever added after, so the statement regenerated later, from
an unchanged ledger, names the same one, and its chain's final hash is the same.

A statement read before any checkpoint holds its last event (one is signed every few seconds while
events arrive) says so in that row instead of naming one; exported again a little later, it is
anchored. ``tollgate ledger verify --statement`` proves the rows against the checkpoint it names
(``app/ledger/statement_proof.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from app.store.event_store import LedgerStore
from app.store.log_reads import KeptCheckpoint

#: The leaves looked up at once (one query), as a statement's entries pass.
LEAF_PAGE = 1000
SECTION = "log_checkpoint"


class LeafIndex:
    """A team's events' leaf indexes, read a page of versions at a time as a statement asks for them
    in version order (a month of a million entries: a thousand queries, not a million)."""

    def __init__(self, store: LedgerStore, team: UUID) -> None:
        self._read = store.read_models.read_rows  # the store's pooled connections: no connection of its own
        self._team = team.hex
        self._known: dict[int, int] = {}
        self._read_to = 0  # versions up to this one have been asked for

    def leaf(self, version: int) -> int | None:
        """The leaf of the team's event ``version`` (None: the log does not have it)."""
        if version not in self._known and version > self._read_to:
            top = version + LEAF_PAGE - 1
            rows = self._read(
                "SELECT leaf_index, originator_version FROM log_leaves WHERE originator_id = {p} "
                "AND originator_version >= {p} AND originator_version <= {p}",
                (self._team, version, top),
            )
            self._known = {int(r["originator_version"]): int(r["leaf_index"]) for r in rows}
            self._read_to = top
        return self._known.get(version)

    def first_checkpoint_holding(self, leaf: int) -> KeptCheckpoint | None:
        """The first kept checkpoint whose tree holds leaf ``leaf`` (its size is past it)."""
        rows = self._read("SELECT * FROM log_checkpoints WHERE size > {p} ORDER BY size LIMIT 1", (leaf,))
        if not rows:
            return None
        row = rows[0]
        return KeptCheckpoint(int(row["size"]), bytes(row["root"]), str(row["note"]), str(row["signed_at"]))


@dataclass(frozen=True, slots=True)
class Anchor:
    """The statement's ``log_checkpoint`` row's cells: the checkpoint (None: none holds it yet)."""

    last_leaf: int | None
    checkpoint: KeptCheckpoint | None

    def cells(self) -> dict[str, Any]:
        if self.checkpoint is not None:
            return {
                "leaf": self.last_leaf,
                "occurred_at": self.checkpoint.signed_at,
                "count": self.checkpoint.size,
                "note": self.checkpoint.note,
            }
        if self.last_leaf is None:
            return {"note": "not anchored: the log has no leaf of the statement's last event"}
        return {
            "leaf": self.last_leaf,
            "note": (
                f"not anchored yet: no checkpoint holds leaf {self.last_leaf} (the statement's last event) yet; "
                "the gateway signs one every few seconds while events arrive: export the statement again"
            ),
        }


def anchor(leaves: LeafIndex, closing_version: int) -> Anchor:
    """The checkpoint a statement closing at ``closing_version`` is anchored to."""
    if closing_version <= 0:
        return Anchor(None, None)
    last = leaves.leaf(closing_version)
    if last is None:
        return Anchor(None, None)
    return Anchor(last, leaves.first_checkpoint_holding(last))
