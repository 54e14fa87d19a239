"""The transparency log's pure core, measured: appending leaves from the right edge in batches, and
computing proofs from tiles at a large tree size (an in-memory store of tiles, so only the core's
own cost is timed: hashing, planning, folding; no database).

    python -m scripts.transparency_bench [--leaves 1000000] [--batch 100] [--proofs 1000] [--database URL]

``--database``: the tiles are then also written to that database's ``log_tiles`` (a fresh ledger
database: ``sqlite:///path`` or a PostgreSQL url whose database is empty), and the proofs timed again
as the gateway computes them, through ``LogReads`` (one query of the tiles a proof needs), each
checked against the in-memory proof.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

from domain.transparency.appender import EMPTY_EDGE, RightEdge, append_leaves, right_edge_from_tiles
from domain.transparency.hashing import HASH_SIZE, leaf_hash
from domain.transparency.tile_proofs import consistency_plan, inclusion_plan, prove_consistency, prove_inclusion
from domain.transparency.tiles import TileCoordinate, right_edge_tiles
from domain.transparency.verify import verify_consistency, verify_inclusion


class MemoryTiles:
    """Tiles in a dict, each kept at its widest; a narrower read gets the prefix."""

    def __init__(self) -> None:
        self.tiles: dict[tuple[int, int], bytes] = {}

    def read_tiles(self, tiles: Sequence[TileCoordinate]) -> list[bytes]:
        return [self.tiles[tile.level, tile.index][: tile.width * HASH_SIZE] for tile in tiles]


def _append(count: int, batch: int, store: MemoryTiles) -> tuple[RightEdge, list[bytes], float, float]:
    leaves = [leaf_hash(f"event {i}".encode()) for i in range(count)]
    edge, times = EMPTY_EDGE, []
    started = time.perf_counter()
    for start in range(0, count, batch):
        before = time.perf_counter()
        appended = append_leaves(edge, leaves[start : start + batch])
        times.append(time.perf_counter() - before)
        for update in appended.tiles:
            store.tiles[update.tile.level, update.tile.index] = update.data
        edge = appended.edge
    total = time.perf_counter() - started
    return edge, leaves, total, statistics.median(times)


P = ParamSpec("P")
R = TypeVar("R")


def _timed(function: Callable[P, R], *arguments: P.args, **keywords: P.kwargs) -> tuple[R, float]:
    before = time.perf_counter()
    result = function(*arguments, **keywords)
    return result, time.perf_counter() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leaves", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--proofs", type=int, default=1000)
    parser.add_argument("--database", help="also time the proofs through this ledger database's tiles")
    options = parser.parse_args()
    n, store = options.leaves, MemoryTiles()

    hashing = time.perf_counter()
    for i in range(min(n, 100_000)):
        leaf_hash(f"event {i}".encode())
    per_leaf_hash = (time.perf_counter() - hashing) / min(n, 100_000)
    edge, leaves, total, median_batch = _append(n, options.batch, store)
    print(
        f"append {n:,} leaf hashes in batches of {options.batch}: {total:.2f} s "
        f"({total / n * 1e6:.2f} µs a leaf; median batch {median_batch * 1e3:.3f} ms); "
        f"leaf hashing alone {per_leaf_hash * 1e6:.2f} µs a leaf"
    )
    print(f"tiles stored: {len(store.tiles):,} ({sum(map(len, store.tiles.values())) / 2**20:.1f} MiB)")

    edge_tiles = right_edge_tiles(n)
    rebuilt, seconds = _timed(right_edge_from_tiles, n, [store.read_tiles([t])[0] if t else None for t in edge_tiles])
    assert rebuilt == edge
    print(f"right edge rebuilt from its {sum(1 for t in edge_tiles if t)} partial tiles: {seconds * 1e3:.2f} ms")

    rng, root = random.Random(32), edge.root
    inclusion, consistency, verify_times, tile_counts, sizes = [], [], [], [], []
    for _ in range(options.proofs):
        index = rng.randrange(n)
        proof, seconds = _timed(prove_inclusion, store, index, n)
        inclusion.append(seconds)
        tile_counts.append(len(inclusion_plan(index, n).tiles))
        sizes.append(len(proof))
        _, seconds = _timed(verify_inclusion, index, n, leaves[index], proof, root)
        verify_times.append(seconds)
    old = n // 3 + 17
    old_root = append_leaves(EMPTY_EDGE, leaves[:old]).root
    proof = prove_consistency(store, old, n)
    verify_consistency(old, n, old_root, root, proof)
    for _ in range(max(1, options.proofs // 10)):
        consistency.append(_timed(prove_consistency, store, old, n)[1])
    print(
        f"inclusion proof at {n:,}: median {statistics.median(inclusion) * 1e3:.3f} ms, "
        f"max {max(inclusion) * 1e3:.3f} ms; {max(sizes)} hashes ({max(sizes) * HASH_SIZE} bytes); "
        f"tiles read: median {statistics.median(tile_counts)}, max {max(tile_counts)}; "
        f"verify median {statistics.median(verify_times) * 1e6:.1f} µs"
    )
    print(
        f"consistency proof {old:,} -> {n:,}: median {statistics.median(consistency) * 1e3:.3f} ms; "
        f"{len(proof)} hashes; tiles read {len(consistency_plan(old, n).tiles)}"
    )
    if options.database:
        _through_the_database(options.database, store, n, old, options.proofs)


def _percentile(times: list[float], share: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _through_the_database(url: str, memory: MemoryTiles, n: int, old: int, proofs: int) -> None:
    """The tiles written to the database's ``log_tiles``, then the proofs read from it as the gateway reads them."""
    from pathlib import Path

    from app.store.database import Database, Sql
    from app.store.event_store import open_ledger_store
    from app.store.log_reads import LogReads

    open_ledger_store(url, Path.cwd(), pool_size=1).close()  # the schema, as a gateway makes it
    sql = Sql(Database.from_url(url, Path.cwd()))
    try:
        with sql.transaction() as tx:
            tx.execute("DELETE FROM log_tiles", ())
            rows = [(level, index, data) for (level, index), data in memory.tiles.items()]
            tx.executemany("INSERT INTO log_tiles (level, tile_index, hashes) VALUES (?, ?, ?)", rows)
        reads, rng = LogReads(sql), random.Random(33)
        inclusion, consistency = [], []
        for _ in range(proofs):
            index = rng.randrange(n)
            proof, seconds = _timed(reads.inclusion, index, n)
            assert proof == prove_inclusion(memory, index, n)
            inclusion.append(seconds)
        for _ in range(max(1, proofs // 10)):
            earlier = rng.randrange(1, n)
            proof, seconds = _timed(reads.consistency, earlier, n)
            assert proof == prove_consistency(memory, earlier, n)
            consistency.append(seconds)
    finally:
        sql.close()
    kind = url.split(":", 1)[0]
    print(
        f"through {kind}: inclusion proof at {n:,}: median {statistics.median(inclusion) * 1e3:.3f} ms, "
        f"p99 {_percentile(inclusion, 0.99) * 1e3:.3f} ms; consistency proof to {n:,}: median "
        f"{statistics.median(consistency) * 1e3:.3f} ms, p99 {_percentile(consistency, 0.99) * 1e3:.3f} ms"
    )


if __name__ == "__main__":
    main()
