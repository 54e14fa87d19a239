"""Which hashes a proof is made of: RFC 9162's proofs as ranges of leaves, and each range as the
complete subtrees whose hashes are stored.

Every hash in an inclusion or consistency proof is the root of some range ``[start, end)`` of leaves
that is a node of the RFC 6962 tree: ``start`` is a multiple of the smallest power of two that holds
``end - start`` leaves. When the range's size is a power of two it is a *complete* subtree, stored
once and never changed (in a tile: ``domain/transparency/tiles.py``); otherwise it lies at the tree's
right edge and its root is folded from the complete subtrees it splits into, largest first
(:func:`complete_subtrees`, :func:`domain.transparency.hashing.fold_right`). The functions here are
arithmetic only: what to read, not the reading.
"""

from __future__ import annotations

from dataclasses import dataclass


class ProofRequestError(ValueError):
    """A proof asked for indexes or sizes that no proof exists for (a leaf beyond the tree, a
    consistency proof to a smaller tree)."""


@dataclass(frozen=True, slots=True, order=True)
class Subtree:
    """The complete subtree of ``2**level`` leaves whose first leaf is ``index * 2**level``: level 0
    is a leaf, and its hash the leaf hash."""

    level: int
    index: int

    @property
    def start(self) -> int:
        return self.index << self.level

    @property
    def end(self) -> int:
        return (self.index + 1) << self.level


#: A range of leaves ``[start, end)`` whose root a proof carries.
LeafRange = tuple[int, int]


def _split(size: int) -> int:
    """RFC 9162's ``k``: the largest power of two smaller than ``size`` (``size`` ≥ 2)."""
    return 1 << ((size - 1).bit_length() - 1)


def complete_subtrees(start: int, end: int) -> list[Subtree]:
    """The complete subtrees that a node range ``[start, end)`` of the RFC 6962 tree splits into, largest
    first: the binary digits of ``end - start``. Folding their hashes from the right gives the range's
    root. A range that is not a node of the tree (``start`` not aligned to its size) is refused: its
    pieces would not fold into any hash the tree has."""
    size = end - start
    if start < 0 or size <= 0:
        raise ProofRequestError(f"no leaves in [{start}, {end})")
    if start % (1 << (size - 1).bit_length()):
        raise ProofRequestError(f"[{start}, {end}) is not a node of the tree: {start} is not aligned to its size")
    out = []
    while start < end:
        level = (end - start).bit_length() - 1
        out.append(Subtree(level, start >> level))
        start += 1 << level
    return out


def inclusion_ranges(index: int, size: int) -> list[LeafRange]:
    """The ranges whose roots make up the inclusion proof of leaf ``index`` in the tree of ``size``
    leaves (RFC 9162 §2.1.3.1, ``PATH``), in the proof's order: the leaf's sibling first, the root's
    other child last."""
    if not 0 <= index < size:
        raise ProofRequestError(f"leaf {index} is not in a tree of {size} leaves")
    path: list[LeafRange] = []
    start, end = 0, size
    while end - start > 1:
        middle = start + _split(end - start)
        if index < middle:
            path.append((middle, end))
            end = middle
        else:
            path.append((start, middle))
            start = middle
    path.reverse()
    return path


def consistency_ranges(old_size: int, new_size: int) -> list[LeafRange]:
    """The ranges whose roots make up the consistency proof from the tree of ``old_size`` leaves to the
    tree of ``new_size`` (RFC 9162 §2.1.4.1, ``SUBPROOF(m, D[n], true)``), in the proof's order. Empty when
    the sizes are equal or the old tree is empty: every tree is consistent with itself and with the
    empty tree."""
    if not 0 <= old_size <= new_size:
        raise ProofRequestError(f"no consistency proof from a tree of {old_size} leaves to one of {new_size}")
    if old_size in (0, new_size):
        return []
    path: list[LeafRange] = []
    start, end, old_end, whole = 0, new_size, old_size, True
    while old_end != end:
        middle = start + _split(end - start)
        if old_end <= middle:
            path.append((middle, end))
            end = middle
        else:
            path.append((start, middle))
            start = middle
            whole = False
    if not whole:  # the old tree's last subtree is no root of it: the verifier needs its hash
        path.append((start, end))
    path.reverse()
    return path
