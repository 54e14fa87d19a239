"""Properties of the tiled log against the RFC's own recursive definitions (``rfc6962_reference.py``):
for random logs of up to 300 leaves appended in random batches, every root, inclusion proof and
consistency proof read from the tiles is the reference's, verifies, and stops verifying when any hash
has one bit flipped or the sizes are not the ones it was made for."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.transparency.appender import right_edge_from_tiles
from domain.transparency.hashing import leaf_hash, merkle_root
from domain.transparency.tile_proofs import (
    consistency_plan,
    inclusion_plan,
    prove_consistency,
    prove_inclusion,
    tree_root,
)
from domain.transparency.tiles import TILE_HEIGHT, right_edge_tiles
from domain.transparency.verify import ProofError, verify_consistency, verify_inclusion
from tests.unit.domain.transparency.rfc6962_reference import Reference
from tests.unit.domain.transparency.tile_store import TileStore


def _entries(count: int, salt: int) -> list[bytes]:
    return [f"event {salt}/{i}".encode() for i in range(count)]


def _flipped(proof: tuple[bytes, ...], element: int, bit: int) -> list[bytes]:
    out = list(proof)
    out[element] = (
        out[element][: bit // 8] + bytes([out[element][bit // 8] ^ (1 << bit % 8)]) + out[element][bit // 8 + 1 :]
    )
    return out


def _fails(check, *arguments) -> bool:
    try:
        check(*arguments)
    except ProofError:
        return True
    return False


@st.composite
def logs(draw):
    """A log's entries and the batch sizes it was appended in."""
    size = draw(st.integers(1, 300))
    batches, left = [], size
    while left:
        batch = draw(st.integers(1, left))
        batches.append(batch)
        left -= batch
    return _entries(size, draw(st.integers(0, 1000))), batches


def _build(entries, batches) -> tuple[TileStore, Reference, list[bytes]]:
    """The log appended batch by batch; each batch's root checked against the reference at that size."""
    rfc = Reference(entries)
    store, at = TileStore(), 0
    for batch in batches:
        appended = store.append([leaf_hash(entry) for entry in entries[at : at + batch]])
        at += batch
        assert appended.root == rfc.root(at)
        rebuilt = right_edge_from_tiles(at, [store.read_tiles([t])[0] if t else None for t in right_edge_tiles(at)])
        assert rebuilt == store.edge  # a store that restarts rebuilds the same edge from its partial tiles
    return store, rfc, [rfc.root(size) for size in range(len(entries) + 1)]


@settings(max_examples=60, deadline=None)
@given(log=logs())
def test_appending_in_any_batches_gives_the_roots_computed_from_scratch(log):
    entries, batches = log
    store, _reference, roots = _build(entries, batches)
    hashes = [leaf_hash(entry) for entry in entries]
    for size in range(len(entries) + 1):
        assert tree_root(store, size) == roots[size] == merkle_root(hashes[:size])


@settings(max_examples=60, deadline=None)
@given(log=logs(), data=st.data())
def test_every_inclusion_proof_from_tiles_is_the_rfcs_and_verifies_only_as_made(log, data):
    entries, batches = log
    store, rfc, roots = _build(entries, batches)
    size = data.draw(st.integers(1, len(entries)))
    index = data.draw(st.integers(0, size - 1))
    leaf = leaf_hash(entries[index])
    proof = prove_inclusion(store, index, size)
    assert list(proof) == rfc.path(index, size)
    verify_inclusion(index, size, leaf, proof, roots[size])
    for element in range(len(proof)):
        bit = data.draw(st.integers(0, 255))
        assert _fails(verify_inclusion, index, size, leaf, _flipped(proof, element, bit), roots[size])
    assert _fails(verify_inclusion, index, size, leaf_hash(b"another event"), proof, roots[size])
    for other in range(1, len(entries) + 1):  # another size: only a size whose proof is this very list passes
        if other != size:
            same = index < other and rfc.path(index, other) == list(proof)
            assert _fails(verify_inclusion, index, other, leaf, proof, roots[other]) != same
    other_index = data.draw(st.integers(0, size - 1))
    if rfc.path(other_index, size) != list(proof):
        assert _fails(verify_inclusion, other_index, size, leaf, proof, roots[size])


@settings(max_examples=60, deadline=None)
@given(log=logs(), data=st.data())
def test_every_consistency_proof_from_tiles_is_the_rfcs_and_verifies_only_as_made(log, data):
    entries, batches = log
    store, rfc, roots = _build(entries, batches)
    new = data.draw(st.integers(1, len(entries)))
    old = data.draw(st.integers(0, new))
    proof = prove_consistency(store, old, new)
    assert list(proof) == ([] if old in (0, new) else rfc.proof(old, new))
    verify_consistency(old, new, roots[old], roots[new], proof)
    for element in range(len(proof)):
        bit = data.draw(st.integers(0, 255))
        assert _fails(verify_consistency, old, new, roots[old], roots[new], _flipped(proof, element, bit))
    if 0 < old < new:
        assert _fails(verify_consistency, old, new, roots[old - 1], roots[new], proof)
        assert _fails(verify_consistency, old, new, roots[old], roots[new - 1], proof)
        for other_old in range(1, len(entries) + 1):
            for other_new in (new, len(entries)):
                if (other_old, other_new) != (old, new) and other_old < other_new:
                    same = rfc.proof(other_old, other_new) == list(proof)
                    bad = _fails(verify_consistency, other_old, other_new, roots[other_old], roots[other_new], proof)
                    assert bad != same


def test_a_proof_reads_a_few_tiles_whatever_the_size():
    """O(log n) reads: at 70,000 leaves (three tile levels) no proof needs more than three tiles a
    level, and each is read once, in one call."""
    store = TileStore()
    entries = _entries(70_000, 7)
    for start in range(0, len(entries), 997):
        store.append([leaf_hash(entry) for entry in entries[start : start + 997]])
    levels = 3
    for size in (65_536, 65_537, 69_999, 70_000):
        root = tree_root(store, size)
        for index in (0, 255, 256, 40_000, 65_535, size - 1):
            plan = inclusion_plan(index, size)
            assert len(plan.tiles) <= 3 * levels
            before = len(store.reads)
            proof = prove_inclusion(store, index, size)
            assert len(store.reads) == before + 1
            verify_inclusion(index, size, leaf_hash(entries[index]), proof, root)
        for old in (1, 256, 65_535, 65_536, size - 1):
            assert len(consistency_plan(old, size).tiles) <= 3 * levels
            verify_consistency(old, size, tree_root(store, old), root, prove_consistency(store, old, size))
    assert store.edge.root == merkle_root(leaf_hash(entry) for entry in entries)
    assert len(store.edge.partial_tiles) == levels == (70_000).bit_length() // TILE_HEIGHT + 1
