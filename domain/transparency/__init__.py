"""The tamper-evident ledger's pure core: an RFC 6962 Merkle log over every ledger event, stored as
C2SP tiles, with C2SP signed checkpoints and the proofs a client checks offline (issue #32).

- ``hashing.py``: leaf and node hashes, the root of a list of leaves.
- ``subtrees.py``: which ranges of leaves a proof's hashes are the roots of.
- ``verify.py``: the offline verifier of inclusion and consistency proofs (hashlib only).
- ``tiles.py``: tile coordinates and paths, which tile holds which hash.
- ``tile_proofs.py``: proofs and roots from tiles, in O(log n) tile reads (a store's ``TileReader``).
- ``appender.py``: appending leaves from the tree's right edge, the tiles to store.
- ``note.py``, ``keys.py``, ``checkpoint.py``: signed notes, Ed25519 note keys, checkpoints.
- ``event_leaf.py``: the canonical bytes of a ledger event as a leaf.

``docs/transparency.md`` specifies every format so it can be recomputed without this code.
"""
