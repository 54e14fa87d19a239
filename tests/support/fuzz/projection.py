"""Whether the audit history projection keeps up with the ledger while it is fuzzed.

One request once stopped the projection for every team: an end user holding a NUL, which
PostgreSQL's text cannot store, so the projector failed on that event and retried it for ever
while every later event waited behind it. The gateway's answers and its balance showed nothing.
So the fuzzers read the projection's position directly — ``projection_tracking``'s row, against
the event store's newest notification id (as ``projections/history.py`` and the event store's
recorder read them) — after every case. The projector catches up every couple of seconds
(``app/ledger/projector.py``), so a case's events may wait that long; one that is still behind the
position :data:`BOUND` seconds after its case ended means the projection stopped there, and one of
the cases that wrote the projector's next slice of events is the input that stopped it.
"""

from __future__ import annotations

import sqlite3
import time
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.ledger.projector import SLICE_EVENTS
from app.store.database import Database
from domain.settings import parse_settings
from projections.history import NAME

#: Seconds a case's events may wait for the projection (it catches up every 2 s, in slices).
BOUND = 8.0


class Positions:
    """The projection's position and the newest event's notification id, on one connection kept open."""

    def __init__(self, config: Path) -> None:
        settings = parse_settings(config.read_text(), str(config))
        self._db = Database.from_url(settings.database_url, config.parent)
        self._id = "rowid" if self._db.kind == "sqlite" else "notification_id"
        self._conn: Any = None

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        sql = sql.replace("{events}", self._db.events_table)
        if self._conn is None:
            if self._db.kind == "sqlite":
                self._conn = sqlite3.connect(self._db.path, isolation_level=None)  # type: ignore[arg-type]
            else:
                import psycopg

                self._conn = psycopg.connect(self._db.conninfo(), autocommit=True)
        if self._db.kind != "sqlite":
            sql = sql.replace("?", "%s")
        return list(self._conn.execute(sql, params).fetchall())

    def now(self) -> tuple[int, int]:
        """(the projection's position, the newest event's id)."""
        position = self._query("SELECT notification_id FROM projection_tracking WHERE name = ?", (NAME,))
        top = self._query(f"SELECT MAX({self._id}) FROM {{events}}")
        return int(position[0][0]) if position else 0, int(top[0][0] or 0)

    def behind(self, position: int) -> int:
        """How many events there are past ``position`` (ids may have gaps: they are counted)."""
        return int(self._query(f"SELECT COUNT(*) FROM {{events}} WHERE {self._id} > ?", (position,))[0][0])

    def page_after(self, position: int) -> tuple[int, int] | None:
        """The ids of the first and last events of the projector's next slice past ``position``."""
        rows = self._query(
            f"SELECT {self._id} FROM {{events}} WHERE {self._id} > ? ORDER BY {self._id} LIMIT ?",
            (position, SLICE_EVENTS),
        )
        return (int(rows[0][0]), int(rows[-1][0])) if rows else None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@dataclass(frozen=True)
class Case:
    """A case whose events (notification ids in ``(before, after]``) are not all projected yet."""

    ended: float
    before: int
    after: int
    route: str
    example: bytes


@dataclass(frozen=True)
class Stall:
    """The projection stood at ``position`` while ``behind`` events waited, for longer than the bound.
    The projector applies a slice of events in one transaction, so the event it could not pass is in
    the slice after ``position``: the cases that wrote its events are the suspects (their routes and
    inputs; none if the slice holds no fuzzed case's events)."""

    position: int
    behind: int
    routes: tuple[str, ...]
    examples: tuple[bytes, ...]

    def detail(self) -> str:
        return (
            f"the audit history projection stopped at event {self.position}: {self.behind} events behind it "
            f"for over {BOUND:g} s"
        )

    @property
    def route(self) -> str:
        return " or ".join(dict.fromkeys(self.routes)) or "(no fuzzed case)"

    @property
    def example(self) -> bytes:
        """The suspects' inputs, the shortest first (one of them stopped the projection)."""
        return b"\n  -- or --\n".join(sorted(self.examples, key=len))

    def tally(self, tally: Any) -> None:
        """Tallied as a failure of the cases that wrote the slice's events (``harness.Tally``)."""
        tally.fail("projection", self.route, None, self.detail(), self.example)


class ProjectionWatch:
    """The cases of one fuzzer whose events the projection has not passed yet; a stall is reported
    once per position it stands at."""

    def __init__(self, positions: Positions) -> None:
        self._positions = positions
        self._waiting: deque[Case] = deque()
        self._reported: set[int] = set()
        self._before = 0

    def before_case(self) -> None:
        """A case begins; what was written since the last one ended (a lease given back) was the last one's."""
        self._before = self._positions.now()[1]
        if self._waiting and self._waiting[-1].after < self._before:
            self._waiting[-1] = replace(self._waiting[-1], after=self._before)

    def after_case(self, route: str, example: bytes) -> Stall | None:
        """Note the case that just ended; a stall if the projection stands behind an older case's
        events past the bound."""
        position, top = self._positions.now()
        if top > self._before:
            self._waiting.append(Case(time.monotonic(), self._before, top, route, example))
        return self._stalled(position, time.monotonic() - BOUND)

    def _stalled(self, position: int, overdue: float) -> Stall | None:
        while self._waiting and self._waiting[0].after <= position:
            self._waiting.popleft()
        if not self._waiting or self._waiting[0].ended > overdue or position in self._reported:
            return None
        self._reported.add(position)
        return self._stall(position)

    def _stall(self, position: int) -> Stall:
        page = self._positions.page_after(position)
        suspects = [c for c in self._waiting if page and c.before < page[1] and c.after >= page[0]]
        self._waiting.clear()
        return Stall(
            position,
            self._positions.behind(position),
            tuple(c.route for c in suspects),
            tuple(c.example for c in suspects),
        )

    def settle(self, within: float = BOUND) -> Stall | None:
        """Wait (at most ``within`` seconds) until the projection has passed every event there is now;
        the stall if it never does."""
        deadline = time.monotonic() + within
        target = self._positions.now()[1]
        while True:
            position = self._positions.now()[0]
            if position >= target:
                self._waiting.clear()
                return None
            if time.monotonic() > deadline:
                if position in self._reported:
                    return None
                self._reported.add(position)
                return self._stall(position)
            time.sleep(0.1)


def behind_at_end(positions: Positions, within: float = BOUND) -> int:
    """How many events the projection is behind once it had ``within`` seconds to catch up (0: current)."""
    deadline = time.monotonic() + within
    target = positions.now()[1]
    while True:
        position = positions.now()[0]
        if position >= target or time.monotonic() > deadline:
            return positions.behind(position)
        time.sleep(0.1)
