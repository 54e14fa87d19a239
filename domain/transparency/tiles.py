"""C2SP tlog-tiles: where each stored hash of the tree lives, and the tiles' names.

A tile is 256 consecutive hashes at one *tile level* ``L``: at level 0 the leaf hashes, at level
``L`` the roots of the complete subtrees of ``256**L`` leaves, each the root of one full tile of the
level below (so tree level ``8·L`` of RFC 6962's tree). The hash at position ``i`` of tile ``N`` at
level ``L`` is ``MTH(D[(N·256 + i)·256**L : (N·256 + i + 1)·256**L])``. The tree levels between are
not stored: a tile's 256 hashes are the leaves of a complete subtree of height 8, and any node inside
it is recomputed from at most 128 of them.

The rightmost tile of each level may be *partial*: ``(size // 256**L) % 256`` hashes wide (``W``), and a
partial tile's hashes are a prefix of the full tile it grows into, so a store may keep only the
widest version and answer for a narrower one with its first ``W`` hashes. Tile paths are
``tile/<L>/<N>[.p/<W>]``, ``N`` written in zero-padded 3-digit groups all but the last prefixed with
``x`` (index 1234067 is ``x001/x234/067``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from domain.transparency.subtrees import ProofRequestError, Subtree

#: Tree levels per tile level: a tile is a complete subtree of height 8.
TILE_HEIGHT = 8
#: Hashes in a full tile (8,192 bytes).
TILE_WIDTH = 1 << TILE_HEIGHT
#: The highest tile level a path may name.
MAX_TILE_LEVEL = 63


class TilePathError(ValueError):
    """A tile path that is not a canonical C2SP tlog-tiles path."""


@dataclass(frozen=True, slots=True, order=True)
class TileCoordinate:
    """Tile ``index`` of tile level ``level``, ``width`` hashes wide (256 when full)."""

    level: int
    index: int
    width: int = TILE_WIDTH

    def __post_init__(self) -> None:
        if not 0 <= self.level <= MAX_TILE_LEVEL:
            raise ValueError(f"tile level {self.level} is not in 0..{MAX_TILE_LEVEL}")
        if self.index < 0:
            raise ValueError(f"tile index {self.index} is negative")
        if not 1 <= self.width <= TILE_WIDTH:
            raise ValueError(f"tile width {self.width} is not in 1..{TILE_WIDTH}")

    @property
    def full(self) -> bool:
        return self.width == TILE_WIDTH

    @property
    def path(self) -> str:
        """The tile's C2SP path, ``tile/<L>/<N>[.p/<W>]``."""
        partial = "" if self.full else f".p/{self.width}"
        return f"tile/{self.level}/{encode_index(self.index)}{partial}"


def encode_index(index: int) -> str:
    """A tile index as C2SP path elements: 3-digit groups, all but the last prefixed with ``x``."""
    digits = str(index)
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    return "/".join([*(f"x{group}" for group in groups[:-1]), groups[-1]])


_PATH = re.compile(r"tile/(0|[1-9][0-9]?)/((?:x[0-9]{3}/)*[0-9]{3})(?:\.p/([1-9][0-9]{0,2}))?")


def parse_tile_path(path: str) -> TileCoordinate:
    """The tile a path names. Only the canonical spelling is accepted (no extra zero groups, no
    leading zeros, a partial width of 1..255), so each tile has exactly one path."""
    match = _PATH.fullmatch(path)
    if match is None:
        raise TilePathError(f"not a tile path: {path!r}")
    level, width = int(match.group(1)), int(match.group(3) or TILE_WIDTH)
    index = int(match.group(2).replace("x", "").replace("/", ""))
    if level > MAX_TILE_LEVEL or (width >= TILE_WIDTH and match.group(3)):
        raise TilePathError(f"not a tile path: {path!r}")
    tile = TileCoordinate(level, index, width)
    if tile.path != path:
        raise TilePathError(f"not the canonical tile path: {path!r} (it is {tile.path!r})")
    return tile


def tile_width(level: int, index: int, size: int) -> int:
    """How many hashes tile ``index`` at ``level`` holds in the tree of ``size`` leaves (0: none yet)."""
    stored = size >> (TILE_HEIGHT * level)
    return max(0, min(TILE_WIDTH, stored - index * TILE_WIDTH))


def tiles_of_size(size: int) -> Iterator[TileCoordinate]:
    """Every tile of the tree of ``size`` leaves, full and partial, level by level. A tree of 70,000
    leaves has 273 full tiles and one of width 112 at level 0, one full and one of width 17 at level 1,
    and one of width 1 at level 2."""
    level = 0
    while stored := size >> (TILE_HEIGHT * level):
        for index in range(stored // TILE_WIDTH):
            yield TileCoordinate(level, index)
        if stored % TILE_WIDTH:
            yield TileCoordinate(level, stored // TILE_WIDTH, stored % TILE_WIDTH)
        level += 1


def right_edge_tiles(size: int) -> list[TileCoordinate | None]:
    """The partial tile of each tile level of the tree of ``size`` leaves, lowest level first (``None``
    where that level's rightmost tile is full): what the appender needs to go on
    (``domain/transparency/appender.py``)."""
    out: list[TileCoordinate | None] = []
    level = 0
    while stored := size >> (TILE_HEIGHT * level):
        width = stored % TILE_WIDTH
        out.append(TileCoordinate(level, stored // TILE_WIDTH, width) if width else None)
        level += 1
    return out


@dataclass(frozen=True, slots=True)
class TileSpan:
    """Where a complete subtree's hash comes from: ``count`` consecutive hashes of ``tile`` from
    position ``first``, hashed together (a single hash when the subtree is at a tile level)."""

    tile: TileCoordinate
    first: int
    count: int


def tile_span(subtree: Subtree, size: int) -> TileSpan:
    """The hashes of which tile, in the tree of ``size`` leaves, make the hash of ``subtree``: the tile
    at the highest tile level at or below the subtree, read at the width that tree size gives it."""
    if subtree.end > size:
        raise ProofRequestError(f"leaves [{subtree.start}, {subtree.end}) are not all in a tree of {size}")
    level, height = divmod(subtree.level, TILE_HEIGHT)
    first = subtree.index << height
    index, offset = divmod(first, TILE_WIDTH)
    tile = TileCoordinate(level, index, tile_width(level, index, size))
    return TileSpan(tile, offset, 1 << height)
