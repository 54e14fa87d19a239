"""One request's record: who asked, what it cost, how it went — the source of its log line and metrics.

The record is made when the request arrives (with the request id every answer carries as
``x-request-id``) and filled in as the request goes: authentication names the team and key,
billing the tokens and the cost, the upstream which deployment answered after how many attempts.
It is published once, when both the answer has been sent and the request's hold is settled —
a stream whose client hung up is charged after its connection is gone, and its line must still
carry that charge.

Handlers reach the record through a context variable, so nothing on the request path needs an
extra argument; Litestar's streaming tasks copy the context, so they see the same record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass, field

from app.observability.request_ids import new_request_id
from domain.usage import TokenUsage

#: Seconds a finished request's line waits at most for its hold to settle.
SETTLE_GRACE = 30.0

_current: ContextVar[RequestRecord | None] = ContextVar("tollgate_request", default=None)


def current_record() -> RequestRecord | None:
    """The record of the request being served, if any (None outside a request: the CLI, tests)."""
    return _current.get()


@dataclass(slots=True)
class RequestRecord:
    method: str
    path: str
    endpoint: str
    publish: Callable[[RequestRecord], None]
    request_id: str = field(default_factory=new_request_id)
    started: float = field(default_factory=time.perf_counter)
    team: str = ""
    key_id: str = ""
    model: str = ""
    #: Whether the client asked for a stream (``"stream": true``), served or refused; false until the
    #: body is read (a request refused before that, e.g. for its key, is logged as not streaming).
    stream: bool = False
    #: Whether the upstream's stream opened (its time to first byte is then a time to first token).
    stream_opened: bool = False
    status: int = 0
    first_byte: float | None = None
    finished_at: float | None = None
    usage: TokenUsage | None = None
    charged: int | None = None  # micro-credits
    upstream_attempts: int = 0
    deployment: int | None = None
    upstream_errors: list[str] = field(default_factory=list)
    error: str | None = None
    dropped_tools: list[str] = field(default_factory=list)  # built-in tools taken out of the request
    settling: bool = False  # a hold is open: the line waits for its charge or release
    _published: bool = False

    def enter(self) -> Token[RequestRecord | None]:
        return _current.set(self)

    @staticmethod
    def leave(token: Token[RequestRecord | None]) -> None:
        _current.reset(token)

    def upstream_failed(self, kind: str | None) -> None:
        """An upstream attempt failed (before answering, or mid-stream)."""
        self.upstream_errors.append(kind or "other")

    def failed(self, message: str) -> None:
        """What went wrong, as the client was told (an error answer, an in-stream error)."""
        self.error = message[:300]

    def holding(self) -> None:
        self.settling = True

    def charge(self, usage: TokenUsage, charged: int) -> None:
        self.usage, self.charged = usage, charged

    def settled(self) -> None:
        """The hold was charged or released (or could not be: the ledger was unwritable)."""
        self.settling = False
        if self.finished_at is not None:
            self._publish()

    def finished(self) -> None:
        """The answer's last byte was sent, or the client went away. A hold still settling (a hang-up's
        charge on its way to the ledger) publishes the line when it is done — or after
        ``SETTLE_GRACE`` seconds whatever happened, so that no request goes unlogged."""
        self.finished_at = time.perf_counter()
        if not self.settling:
            self._publish()
        else:
            asyncio.get_running_loop().call_later(SETTLE_GRACE, self._publish)

    def _publish(self) -> None:
        if not self._published:
            self._published = True
            self.publish(self)

    @property
    def latency(self) -> float:
        return (self.finished_at or time.perf_counter()) - self.started

    @property
    def time_to_first_byte(self) -> float | None:
        return None if self.first_byte is None else self.first_byte - self.started
