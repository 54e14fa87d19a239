"""RFC 6962 §2.1 written as the RFC writes it, recursively: the independent implementation that the
log's iterative, tiled one is checked against. Nothing here is shared with ``domain/transparency``:
only ``hashlib``. A range's hash is remembered once computed, so the recursion stays cheap enough
for property tests."""

from __future__ import annotations

import hashlib


def _k(n: int) -> int:
    """The largest power of two smaller than n."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


class Reference:
    """The RFC's MTH, PATH and PROOF over the entries ``D`` (the leaves' data, not their hashes)."""

    def __init__(self, entries: list[bytes]) -> None:
        self.entries = entries
        self._hashes: dict[tuple[int, int], bytes] = {}

    def mth(self, start: int, end: int) -> bytes:
        """MTH(D[start:end])."""
        key = (start, end)
        if key not in self._hashes:
            n = end - start
            if n == 0:
                value = hashlib.sha256(b"").digest()
            elif n == 1:
                value = hashlib.sha256(b"\x00" + self.entries[start]).digest()
            else:
                k = _k(n)
                value = hashlib.sha256(b"\x01" + self.mth(start, start + k) + self.mth(start + k, end)).digest()
            self._hashes[key] = value
        return self._hashes[key]

    def root(self, n: int) -> bytes:
        return self.mth(0, n)

    def path(self, m: int, n: int) -> list[bytes]:
        """PATH(m, D[n])."""
        return self._path(m, 0, n)

    def _path(self, m: int, start: int, end: int) -> list[bytes]:
        n = end - start
        if n == 1:
            return []
        k = _k(n)
        if m < k:
            return [*self._path(m, start, start + k), self.mth(start + k, end)]
        return [*self._path(m - k, start + k, end), self.mth(start, start + k)]

    def proof(self, m: int, n: int) -> list[bytes]:
        """PROOF(m, D[n]) = SUBPROOF(m, D[n], true), for 0 < m < n."""
        return self._subproof(m, 0, n, True)

    def _subproof(self, m: int, start: int, end: int, complete: bool) -> list[bytes]:
        n = end - start
        if m == n:
            return [] if complete else [self.mth(start, end)]
        k = _k(n)
        if m <= k:
            return [*self._subproof(m, start, start + k, complete), self.mth(start + k, end)]
        return [*self._subproof(m - k, start + k, end, False), self.mth(start, start + k)]
