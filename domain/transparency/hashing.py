"""RFC 6962 / RFC 9162 Merkle tree hashing with SHA-256: the only hashing the log does.

A leaf's hash is ``SHA-256(0x00 || data)`` and an interior node's ``SHA-256(0x01 || left || right)``
(RFC 9162 §2.1.1): the two prefixes keep a leaf from ever being passed off as a node. The tree over
``n`` leaves splits at the largest power of two below ``n`` (the left side is always the complete
one), so a tree of any size has exactly one root, and the tree of ``n`` leaves is a prefix of the tree
of ``n + k``: that is what makes consistency proofs possible. The empty tree's root is ``SHA-256("")``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

#: Every hash in the log is a SHA-256 digest.
HASH_SIZE = 32
#: The root of the tree of no leaves: the hash of the empty string (RFC 9162 §2.1.1).
EMPTY_ROOT = hashlib.sha256(b"").digest()

_sha256 = hashlib.sha256


def leaf_hash(data: bytes) -> bytes:
    """The hash of one leaf: ``SHA-256(0x00 || data)``."""
    return _sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """The hash of an interior node from its children's: ``SHA-256(0x01 || left || right)``."""
    return _sha256(b"\x01" + left + right).digest()


def fold_right(hashes: list[bytes]) -> bytes:
    """The root of a range from its complete subtrees, left to right and largest first (as
    :func:`domain.transparency.subtrees.complete_subtrees` gives them): the rightmost two are joined
    first, as the RFC's split puts the complete part on the left at every level."""
    root = hashes[-1]
    for left in reversed(hashes[:-1]):
        root = _sha256(b"\x01" + left + root).digest()
    return root


def merkle_root(leaf_hashes: Iterable[bytes]) -> bytes:
    """The root of the tree over these leaf hashes (``MTH`` of RFC 9162 §2.1.1), in one pass that keeps
    only the O(log n) roots of the complete subtrees so far."""
    stack: list[bytes] = []
    for size, hashed in enumerate(leaf_hashes):
        node, carry = hashed, size
        while carry & 1:
            node = _sha256(b"\x01" + stack.pop() + node).digest()
            carry >>= 1
        stack.append(node)
    return fold_right(stack) if stack else EMPTY_ROOT
