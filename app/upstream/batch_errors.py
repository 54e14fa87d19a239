"""What went wrong calling an upstream's batch APIs: its status (0: it could not be reached) and words."""

from __future__ import annotations


class BatchUpstreamError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"upstream answered {status}: {detail}" if status else f"upstream unreachable: {detail}")
        self.status = status
        self.detail = detail
