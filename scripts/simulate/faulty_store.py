"""The ledger's real event store (SQLite), with the faults a database and its network can cause,
drawn from the simulation's seed.

Everything is the production ``LedgerStore``; only ``save_teams`` (the one call that commits) is
wrapped, so that a commit may:

- **fail** before anything is written (the database unreachable, a connection reset): the writer
  sees ``StoreUnreachable`` and nothing of the batch is stored;
- **succeed with its acknowledgement lost**: everything is stored, and the writer sees the same
  ``StoreUnreachable`` it would see had the network dropped the answer;
- succeed, **slowly**: the simulated clock moves on while it commits (a database under load);
- fail while the database is **read-only** (a failover, a full disk): every commit for some steps.

Reads are left alone: a read that fails makes the writer forget a copy, which it loads again, and
the simulator's invariants compare every copy with a replay anyway.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.store.event_store import LedgerStore
from app.store.log_append import LoggedLeaf
from app.store.read_models import IdempotentResponse
from app.store.store_errors import StoreUnreachable
from domain.ledger import TeamLedger


@dataclass
class FaultRates:
    """How often each fault is injected (per commit)."""

    commit_fails: float = 0.03
    ack_lost: float = 0.03
    slow: float = 0.03  # a commit that takes 1-20 s of simulated time


@dataclass
class FaultCounts:
    """The faults injected so far, by kind."""

    by_kind: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str) -> None:
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1


class FaultyStore:
    """A ``LedgerStore`` whose commits fail, or lose their acknowledgement, as the seed says."""

    def __init__(
        self,
        store: LedgerStore,
        rng: random.Random,
        rates: FaultRates,
        counts: FaultCounts,
        wait: Callable[[float], None] = lambda _: None,
    ) -> None:
        """``wait``: moves the simulated clock on (a slow commit takes time)."""
        self._store = store
        self._rng = rng
        self.rates = rates
        self.counts = counts
        self.enabled = True
        self._wait = wait
        self._read_only_steps = 0

    def read_only_for(self, steps: int) -> None:
        self._read_only_steps = steps
        self.counts.add("store read-only")

    def next_step(self) -> None:
        self._read_only_steps = max(0, self._read_only_steps - 1)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def save_teams(
        self, teams: Iterable[TeamLedger], idempotent: Sequence[IdempotentResponse] = ()
    ) -> list[LoggedLeaf]:
        teams = list(teams)
        if not self.enabled or not any(t.pending_events for t in teams):
            return self._store.save_teams(teams, idempotent)
        if self._read_only_steps:
            raise StoreUnreachable("simulated: the database is read-only; nothing was written")
        roll = self._rng.random()
        if self._rng.random() < self.rates.slow:
            self.counts.add("commit slow")
            self._wait(self._rng.uniform(1, 20))
        if roll < self.rates.commit_fails:
            self.counts.add("commit failed")
            raise StoreUnreachable("simulated: the database did not answer; nothing was written")
        logged = self._store.save_teams(teams, idempotent)
        if roll < self.rates.commit_fails + self.rates.ack_lost:
            self.counts.add("acknowledgement lost")
            raise StoreUnreachable("simulated: the commit's answer was lost on the way back")
        return logged
