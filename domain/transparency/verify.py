"""The offline verifier's proofs: RFC 9162's inclusion and consistency verification, word for word.

This module needs nothing but ``hashlib`` (through ``domain/transparency/hashing.py``): no database,
no tiles, no gateway. A client holding a leaf hash, a checkpoint (its size and root) and a proof
checks here that the log includes the leaf; holding two checkpoints and a proof between them, that
the later tree extends the earlier one. Every failure raises :class:`ProofError` and nothing else.

The algorithms are RFC 9162 §2.1.3.2 (inclusion) and §2.1.4.2 (consistency), with the edge cases
as transparency-dev/merkle settles them: a consistency proof between equal sizes, or from the empty
tree, is empty (equal sizes also need equal roots), and every hash must be 32 bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

from domain.transparency.hashing import HASH_SIZE, node_hash


class ProofError(ValueError):
    """A proof that does not prove what it was offered for."""


def _check_hash(value: bytes, what: str) -> None:
    if len(value) != HASH_SIZE:
        raise ProofError(f"{what} is {len(value)} bytes, not {HASH_SIZE}")


def root_from_inclusion_proof(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """The root that ``proof`` and the leaf hash ``leaf`` at ``index`` give for a tree of ``size``
    leaves (RFC 9162 §2.1.3.2, steps 1–5 without the final comparison)."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size} leaves")
    _check_hash(leaf, "the leaf hash")
    fn, sn, root = index, size - 1, leaf
    for element in proof:
        _check_hash(element, "a proof hash")
        if sn == 0:
            raise ProofError("the proof is longer than the path from the leaf to the root")
        if fn & 1 or fn == sn:
            root = node_hash(element, root)
            while fn and not fn & 1:  # fn == sn on a left child: climb to where the path turns
                fn >>= 1
                sn >>= 1
        else:
            root = node_hash(root, element)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("the proof is shorter than the path from the leaf to the root")
    return root


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> None:
    """Check that the leaf hash ``leaf`` is leaf ``index`` of the tree of ``size`` leaves whose root is
    ``root``; raise :class:`ProofError` if the proof does not show it."""
    _check_hash(root, "the root")
    if root_from_inclusion_proof(index, size, leaf, proof) != root:
        raise ProofError(f"the proof does not lead from leaf {index} to the root of the tree of {size} leaves")


def verify_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]) -> None:
    """Check that the tree of ``new_size`` leaves with root ``new_root`` extends the tree of ``old_size``
    leaves with root ``old_root`` (RFC 9162 §2.1.4.2); raise :class:`ProofError` if the proof does not
    show it."""
    _check_hash(old_root, "the old root")
    _check_hash(new_root, "the new root")
    for element in proof:
        _check_hash(element, "a proof hash")
    if not 0 <= old_size <= new_size:
        raise ProofError(f"a tree of {new_size} leaves cannot extend one of {old_size}")
    if old_size == new_size:
        if proof:
            raise ProofError("a proof between equal sizes must be empty")
        if old_root != new_root:
            raise ProofError(f"two different roots for the same size {old_size}")
        return
    if old_size == 0:
        if proof:
            raise ProofError("a proof from the empty tree must be empty")
        return
    if not proof:
        raise ProofError("the proof is empty")
    _walk_consistency(old_size, new_size, old_root, new_root, proof)


def _walk_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]) -> None:
    """RFC 9162 §2.1.4.2 steps 2–7, for ``0 < old_size < new_size`` and a non-empty proof."""
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # step 2: the old tree is a complete subtree, its root the first hash
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:  # step 4
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for element in path[1:]:
        if sn == 0:
            raise ProofError("the proof is longer than the path to the new root")
        if fn & 1 or fn == sn:
            fr = node_hash(element, fr)
            sr = node_hash(element, sr)
            while fn and not fn & 1:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, element)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("the proof is shorter than the path to the new root")
    if fr != old_root:
        raise ProofError(f"the proof does not lead to the old root of the tree of {old_size} leaves")
    if sr != new_root:
        raise ProofError(f"the proof does not lead to the new root of the tree of {new_size} leaves")
