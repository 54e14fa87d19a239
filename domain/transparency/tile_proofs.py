"""Proofs and roots computed from tiles, in O(log n) tile reads.

A proof is planned first (:func:`inclusion_plan`, :func:`consistency_plan`, :func:`root_plan`): which
complete subtrees its hashes fold from, and so which tiles hold them. The caller reads those tiles
however it stores them, in one batch, and the plan turns their bytes into the proof
(:meth:`ProofPlan.resolve`). Nothing here does I/O: a store implements :class:`TileReader` (one call,
all the tiles) and :func:`prove_inclusion` and its siblings run the three steps; an asynchronous
store runs the plan's steps itself. An inclusion or consistency proof at ``n`` leaves has at most
``2·log2(n)`` hashes, and its subtrees lie in at most three tiles per tile level, so a proof reads a
handful of tiles (``log256(n)`` levels) and hashes at most 127 pairs per subtree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from domain.transparency.hashing import EMPTY_ROOT, HASH_SIZE, fold_right, node_hash
from domain.transparency.subtrees import (
    LeafRange,
    Subtree,
    complete_subtrees,
    consistency_ranges,
    inclusion_ranges,
)
from domain.transparency.tiles import TileCoordinate, TileSpan, tile_span


class TileReadError(ValueError):
    """A store answered a tile read with the wrong number of tiles or bytes."""


class TileReader(Protocol):
    """What a store of tiles provides: the bytes of each tile asked for, in the order asked, each
    exactly ``width × 32`` bytes (a store that keeps a wider version of a tile answers with its first
    ``width`` hashes: a tile's hashes never change as it grows)."""

    def read_tiles(self, tiles: Sequence[TileCoordinate]) -> Sequence[bytes]: ...


def _subtree_hash(span: TileSpan, data: bytes) -> bytes:
    """The root of ``span.count`` consecutive hashes of a tile (a power of two, at most 128)."""
    row = [
        data[offset : offset + HASH_SIZE]
        for offset in range(span.first * HASH_SIZE, (span.first + span.count) * HASH_SIZE, HASH_SIZE)
    ]
    while len(row) > 1:
        row = [node_hash(row[i], row[i + 1]) for i in range(0, len(row), 2)]
    return row[0]


@dataclass(frozen=True, slots=True)
class ProofPlan:
    """The tiles to read for a list of range roots at one tree size, and how to fold them."""

    size: int
    ranges: tuple[tuple[Subtree, ...], ...]
    tiles: tuple[TileCoordinate, ...]

    def resolve(self, data: Sequence[bytes]) -> tuple[bytes, ...]:
        """The ranges' roots, in order, from the bytes of :attr:`tiles` (in the same order)."""
        if len(data) != len(self.tiles):
            raise TileReadError(f"asked for {len(self.tiles)} tiles, got {len(data)}")
        by_tile = dict(zip(self.tiles, data, strict=True))
        for tile, content in by_tile.items():
            if len(content) != tile.width * HASH_SIZE:
                raise TileReadError(f"{tile.path} is {len(content)} bytes, not {tile.width * HASH_SIZE}")
        hashes: dict[Subtree, bytes] = {}
        roots = []
        for pieces in self.ranges:
            for subtree in pieces:
                if subtree not in hashes:
                    span = tile_span(subtree, self.size)
                    hashes[subtree] = _subtree_hash(span, by_tile[span.tile])
            roots.append(fold_right([hashes[subtree] for subtree in pieces]))
        return tuple(roots)


def plan_ranges(size: int, ranges: Sequence[LeafRange]) -> ProofPlan:
    """The plan for the roots of these node ranges of the tree of ``size`` leaves."""
    pieces = tuple(tuple(complete_subtrees(start, end)) for start, end in ranges)
    tiles = sorted({tile_span(subtree, size).tile for group in pieces for subtree in group})
    return ProofPlan(size, pieces, tuple(tiles))


def inclusion_plan(index: int, size: int) -> ProofPlan:
    """The plan for the inclusion proof of leaf ``index`` in the tree of ``size`` leaves."""
    return plan_ranges(size, inclusion_ranges(index, size))


def consistency_plan(old_size: int, new_size: int) -> ProofPlan:
    """The plan for the consistency proof from the tree of ``old_size`` leaves to ``new_size``."""
    return plan_ranges(new_size, consistency_ranges(old_size, new_size))


def root_plan(size: int) -> ProofPlan:
    """The plan for the root of the tree of ``size`` leaves (none for the empty tree: see
    :func:`tree_root`)."""
    return plan_ranges(size, [(0, size)] if size else [])


def leaf_plan(index: int, size: int) -> ProofPlan:
    """The plan for the hash of leaf ``index`` as the tree of ``size`` leaves stores it."""
    return plan_ranges(size, [(index, index + 1)])


def _run(reader: TileReader, plan: ProofPlan) -> tuple[bytes, ...]:
    if not plan.tiles:
        return ()
    return plan.resolve(list(reader.read_tiles(plan.tiles)))


def prove_inclusion(reader: TileReader, index: int, size: int) -> tuple[bytes, ...]:
    """The inclusion proof of leaf ``index`` in the tree of ``size`` leaves, from the reader's tiles."""
    return _run(reader, inclusion_plan(index, size))


def prove_consistency(reader: TileReader, old_size: int, new_size: int) -> tuple[bytes, ...]:
    """The consistency proof from the tree of ``old_size`` leaves to ``new_size``, from the reader's tiles."""
    return _run(reader, consistency_plan(old_size, new_size))


def tree_root(reader: TileReader, size: int) -> bytes:
    """The root of the tree of ``size`` leaves (any size the store has reached), from the reader's tiles."""
    roots = _run(reader, root_plan(size))
    return roots[0] if roots else EMPTY_ROOT
