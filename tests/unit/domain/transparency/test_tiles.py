"""C2SP tlog-tiles: the paths, which tiles a tree has, and where a subtree's hash is read from."""

from __future__ import annotations

import pytest

from domain.transparency.hashing import leaf_hash, merkle_root
from domain.transparency.subtrees import ProofRequestError, Subtree, complete_subtrees
from domain.transparency.tile_proofs import ProofPlan, TileReadError, inclusion_plan, leaf_plan, root_plan
from domain.transparency.tiles import (
    TileCoordinate,
    TilePathError,
    parse_tile_path,
    right_edge_tiles,
    tile_span,
    tiles_of_size,
)
from tests.unit.domain.transparency.tile_store import TileStore


@pytest.mark.parametrize(
    ("path", "tile"),
    [
        ("tile/0/000", TileCoordinate(0, 0)),
        ("tile/0/x001/x234/067", TileCoordinate(0, 1234067)),  # the spec's example
        ("tile/4/001", TileCoordinate(4, 1)),
        ("tile/4/001.p/5", TileCoordinate(4, 1, 5)),
        ("tile/5/x123/x456/078", TileCoordinate(5, 123456078)),  # golang.org/x/mod's, less its height element
        ("tile/5/x123/x456/078.p/2", TileCoordinate(5, 123456078, 2)),
        ("tile/1/x003/x057/500", TileCoordinate(1, 3057500)),
        ("tile/63/999.p/255", TileCoordinate(63, 999, 255)),
        ("tile/2/x001/000", TileCoordinate(2, 1000)),
    ],
)
def test_tile_paths_are_c2sps(path, tile):
    assert tile.path == path
    assert parse_tile_path(path) == tile


@pytest.mark.parametrize(
    "path",
    [
        "tile/5/123/456/078",  # groups without the x
        "tile/5/-1/123/456/078",
        "tile/5/x000/001",  # an extra zero group: not the one spelling of 1
        "tile/5/01",
        "tile/5/0001",
        "tile/01/000",  # a leading zero in the level
        "tile/64/000",  # beyond level 63
        "tile/0/000.p/0",
        "tile/0/000.p/256",  # a full tile has no .p
        "tile/0/000.p/007",
        "tile/0/000/",
        "/tile/0/000",
        "tile/0/x001",  # the last group never has an x
        "tile/entries/000",
        "tile/0/000.p/",
        "tile/8/0/001",  # golang.org/x/mod's own paths name a height: C2SP's do not
    ],
)
def test_other_spellings_are_refused(path):
    with pytest.raises(TilePathError):
        parse_tile_path(path)


def test_the_tiles_of_a_tree_are_the_specs():
    """tlog-tiles: 70,000 leaves are 273 full level-0 tiles, a level-0 tile of width 112, one full level-1
    tile, a level-1 tile of width 17 and a level-2 tile of width 1; 256 leaves are a full level-0 tile and
    a level-1 tile of width 1."""
    tiles = list(tiles_of_size(70_000))
    assert tiles[:273] == [TileCoordinate(0, i) for i in range(273)]
    assert tiles[273:] == [
        TileCoordinate(0, 273, 112),
        TileCoordinate(1, 0),
        TileCoordinate(1, 1, 17),
        TileCoordinate(2, 0, 1),
    ]
    assert list(tiles_of_size(256)) == [TileCoordinate(0, 0), TileCoordinate(1, 0, 1)]
    assert list(tiles_of_size(0)) == []
    assert right_edge_tiles(70_000) == [TileCoordinate(0, 273, 112), TileCoordinate(1, 1, 17), TileCoordinate(2, 0, 1)]
    assert right_edge_tiles(65_536) == [None, None, TileCoordinate(2, 0, 1)]


def test_a_subtrees_hash_is_read_from_the_highest_tile_level_below_it():
    assert tile_span(Subtree(0, 5), 6).tile == TileCoordinate(0, 0, 6)
    span = tile_span(Subtree(3, 33), 300)  # leaves 264..271: in level-0 tile 1, at width 44
    assert (span.tile, span.first, span.count) == (TileCoordinate(0, 1, 44), 8, 8)
    span = tile_span(Subtree(8, 1), 600)  # leaves 256..511: one hash of the level-1 tile
    assert (span.tile, span.first, span.count) == (TileCoordinate(1, 0, 2), 1, 1)
    span = tile_span(Subtree(15, 1), 70_000)  # leaves 32768..65535: 128 hashes of the level-1 tile
    assert (span.tile, span.first, span.count) == (TileCoordinate(1, 0), 128, 128)
    with pytest.raises(ProofRequestError):
        tile_span(Subtree(3, 1), 15)  # leaves 8..15 are not all in a tree of 15


def test_ranges_that_are_no_node_of_the_tree_are_refused():
    assert complete_subtrees(0, 7) == [Subtree(2, 0), Subtree(1, 2), Subtree(0, 6)]
    assert complete_subtrees(8, 13) == [Subtree(2, 2), Subtree(0, 12)]
    for start, end in ((1, 3), (2, 5), (4, 4), (3, 2), (-1, 1)):
        with pytest.raises(ProofRequestError):
            complete_subtrees(start, end)
    for index, size in ((0, 0), (5, 5), (-1, 3)):
        with pytest.raises(ProofRequestError):
            inclusion_plan(index, size)


def test_a_store_that_answers_the_wrong_bytes_is_caught():
    store = TileStore()
    hashes = [leaf_hash(i.to_bytes(2, "big")) for i in range(300)]
    store.append(hashes)
    plan: ProofPlan = root_plan(300)
    good = store.read_tiles(plan.tiles)
    assert plan.resolve(good) == (merkle_root(hashes),)
    assert leaf_plan(299, 300).resolve(store.read_tiles(leaf_plan(299, 300).tiles)) == (hashes[299],)
    with pytest.raises(TileReadError):
        plan.resolve(good[:-1])
    with pytest.raises(TileReadError):
        plan.resolve([*good[:-1], good[-1] + bytes(32)])  # a tile one hash wider than asked
    with pytest.raises(TileReadError):
        plan.resolve([*good[:-1], good[-1][:-1]])
