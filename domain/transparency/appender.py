"""Appending leaves to the tiled tree without recomputing it: the right edge in, new tiles out.

The tree of ``n`` leaves is, to whoever appends to it, its *right edge*: the roots of the complete
subtrees that ``n``'s binary digits split it into (at most log2(n) hashes, from which the root
folds) and the partial tile of every tile level (fewer than 256 hashes each, the tiles the next
leaves extend). :class:`RightEdge` holds both; a store rebuilds it after a restart from its partial
tiles alone (:func:`right_edge_from_tiles`, the tiles :func:`domain.transparency.tiles.right_edge_tiles`
names), and :func:`append_leaves` takes it and ``k`` new leaf hashes to the new edge, the new root and
every tile the leaves changed, in O(k + log n) hashing: each leaf joins the edge as a binary counter
carries, one node hash per leaf on average, and a node that lands on a tile level (every eighth tree
level) is the next hash of that level's tile.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from domain.transparency.hashing import EMPTY_ROOT, HASH_SIZE, fold_right
from domain.transparency.tiles import TILE_HEIGHT, TILE_WIDTH, TileCoordinate, right_edge_tiles

_sha256 = hashlib.sha256
_FULL_TILE_BYTES = TILE_WIDTH * HASH_SIZE


class RightEdgeError(ValueError):
    """A right edge whose parts do not fit its size, or a leaf hash that is not 32 bytes."""


@dataclass(frozen=True, slots=True)
class RightEdge:
    """What appending to the tree of ``size`` leaves needs: ``subtrees``, the roots of its complete
    subtrees left to right (largest first, one per binary digit 1 of ``size``), and ``partial_tiles``,
    the bytes of the partial tile of each tile level from level 0 (``b""`` where it is full). Only
    their shapes are checked here, not that the roots are the tiles' (that would cost the hashing
    :func:`right_edge_from_tiles` does): an edge comes from that function or from an append."""

    size: int
    subtrees: tuple[bytes, ...]
    partial_tiles: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if self.size < 0 or len(self.subtrees) != self.size.bit_count():
            raise RightEdgeError(f"a tree of {self.size} leaves has {self.size.bit_count()} complete subtrees")
        if any(len(subtree) != HASH_SIZE for subtree in self.subtrees):
            raise RightEdgeError("a subtree root is not 32 bytes")
        widths = [tile.width if tile else 0 for tile in right_edge_tiles(self.size)]
        if [len(tile) for tile in self.partial_tiles] != [width * HASH_SIZE for width in widths]:
            raise RightEdgeError(f"the partial tiles do not fit a tree of {self.size} leaves")

    @property
    def root(self) -> bytes:
        """The tree's root, folded from its complete subtrees."""
        return fold_right(list(self.subtrees)) if self.subtrees else EMPTY_ROOT


#: The right edge of the empty tree.
EMPTY_EDGE = RightEdge(0, (), ())


def _split_hashes(data: bytes) -> list[bytes]:
    return [data[offset : offset + HASH_SIZE] for offset in range(0, len(data), HASH_SIZE)]


def right_edge_from_tiles(size: int, tiles: Sequence[bytes | None]) -> RightEdge:
    """The right edge of the tree of ``size`` leaves from the bytes of its partial tiles, in the order of
    :func:`domain.transparency.tiles.right_edge_tiles` (``None`` or ``b""`` where that names none). Each
    tile level's hashes are joined by the binary digits of its width, highest level first."""
    coordinates = right_edge_tiles(size)
    if len(tiles) != len(coordinates):
        raise RightEdgeError(f"a tree of {size} leaves has {len(coordinates)} tile levels, got {len(tiles)} tiles")
    subtrees: list[bytes] = []
    partial: list[bytes] = []
    for coordinate, data in zip(coordinates, tiles, strict=True):
        content = data or b""
        width = coordinate.width if coordinate else 0
        if len(content) != width * HASH_SIZE:
            raise RightEdgeError(f"the partial tile at tile level {len(partial)} must be {width} hashes wide")
        partial.append(content)
    for content in reversed(partial):
        hashes, at = _split_hashes(content), 0
        for height in reversed(range(TILE_HEIGHT)):
            if len(hashes) >> height & 1:
                row = hashes[at : at + (1 << height)]
                at += 1 << height
                while len(row) > 1:
                    row = [_sha256(b"\x01" + row[i] + row[i + 1]).digest() for i in range(0, len(row), 2)]
                subtrees.append(row[0])
    return RightEdge(size, tuple(subtrees), tuple(partial))


@dataclass(frozen=True, slots=True)
class TileUpdate:
    """A tile the append changed: ``tile`` (its new width), all its bytes ``data``, and ``start``, the
    position of its first hash this append added (a store may write ``data[start × 32:]`` only)."""

    tile: TileCoordinate
    start: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Appended:
    """The result of an append: the new right edge, the new root, and the tiles to store, by tile
    level then index (full tiles once, and the partial tile of each level the append reached)."""

    edge: RightEdge
    root: bytes
    tiles: tuple[TileUpdate, ...]


class _Tiles:
    """The tiles an append is growing, and the ones it has finished."""

    def __init__(self, edge: RightEdge) -> None:
        self.partial = [bytearray(tile) for tile in edge.partial_tiles]
        self.started: dict[int, int] = {}  # tile level -> position of the first hash added to its current tile
        self.finished: list[TileUpdate] = []

    def add(self, level: int, count: int, node: bytes) -> None:
        """Add the ``count``-th hash of tile level ``level`` (counted from 0)."""
        if level == len(self.partial):
            self.partial.append(bytearray())
        tile = self.partial[level]
        position = count % TILE_WIDTH
        self.started.setdefault(level, position)
        tile += node
        if len(tile) == _FULL_TILE_BYTES:
            coordinate = TileCoordinate(level, count // TILE_WIDTH)
            self.finished.append(TileUpdate(coordinate, self.started.pop(level), bytes(tile)))
            self.partial[level] = bytearray()

    def updates(self, size: int) -> tuple[TileUpdate, ...]:
        out = list(self.finished)
        for level, start in self.started.items():
            stored = size >> (TILE_HEIGHT * level)
            coordinate = TileCoordinate(level, stored // TILE_WIDTH, stored % TILE_WIDTH)
            out.append(TileUpdate(coordinate, start, bytes(self.partial[level])))
        out.sort(key=lambda update: update.tile)
        return tuple(out)


def append_leaves(edge: RightEdge, leaf_hashes: Sequence[bytes]) -> Appended:
    """Append these leaf hashes to the tree whose right edge is ``edge``: the new edge, its root, and
    the tiles to store. The leaf hashes are the 32-byte hashes of :func:`domain.transparency.hashing.leaf_hash`."""
    size = edge.size
    subtrees = list(edge.subtrees)
    tiles = _Tiles(edge)
    for leaf in leaf_hashes:
        if len(leaf) != HASH_SIZE:
            raise RightEdgeError(f"a leaf hash is {len(leaf)} bytes, not {HASH_SIZE}")
        tiles.add(0, size, leaf)
        node, carry, height = leaf, size, 0
        while carry & 1:
            node = _sha256(b"\x01" + subtrees.pop() + node).digest()
            carry >>= 1
            height += 1
            if height % TILE_HEIGHT == 0:
                level = height // TILE_HEIGHT
                tiles.add(level, size >> (TILE_HEIGHT * level), node)
        subtrees.append(node)
        size += 1
    new_edge = RightEdge(size, tuple(subtrees), tuple(bytes(tile) for tile in tiles.partial))
    return Appended(new_edge, new_edge.root, tiles.updates(size))
