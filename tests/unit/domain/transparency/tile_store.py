"""A store of tiles in a dict, for the tests: what a database table of tiles will be, without the
database. It keeps each tile at its widest and answers a narrower read with its prefix, and it
counts the reads."""

from __future__ import annotations

from collections.abc import Sequence

from domain.transparency.appender import EMPTY_EDGE, Appended, RightEdge, append_leaves
from domain.transparency.hashing import HASH_SIZE
from domain.transparency.tiles import TileCoordinate


class TileStore:
    def __init__(self) -> None:
        self.tiles: dict[tuple[int, int], bytes] = {}
        self.edge: RightEdge = EMPTY_EDGE
        self.reads: list[list[TileCoordinate]] = []

    def append(self, leaf_hashes: Sequence[bytes]) -> Appended:
        appended = append_leaves(self.edge, leaf_hashes)
        for update in appended.tiles:
            key = (update.tile.level, update.tile.index)
            before = self.tiles.get(key, b"")
            # what a store that appends (rather than rewrites) relies on
            assert len(before) == update.start * HASH_SIZE
            assert update.data[: len(before)] == before
            assert len(update.data) == update.tile.width * HASH_SIZE
            self.tiles[key] = update.data
        self.edge = appended.edge
        return appended

    def read_tiles(self, tiles: Sequence[TileCoordinate]) -> list[bytes]:
        self.reads.append(list(tiles))
        return [self.tiles[tile.level, tile.index][: tile.width * HASH_SIZE] for tile in tiles]
