"""One simulated world: gateway processes sharing one ledger, requests, faults, and the invariants.

The production code runs here unchanged: each process is a ``LedgerWriter`` (its batching, its
version races and catching up, its cache of teams) and a ``LedgerService`` over the real event
store, deciding with the real ``TeamLedger``; only the writer's thread is replaced by ``drain()``
on the one simulation thread, the store's commits by ``FaultyStore``'s, and the ledger clock by the
simulated one (``domain.clock.run_on``). Every choice (which process, which team, how much, which
fault, how much time passes) is drawn from one ``random.Random(seed)``, so a seed replays exactly.

What a request does is the billing layer's rule, modelled in a few lines (``app/ledger/billing.py``
is asynchronous and not run here): a hold before the upstream call; after it, a charge of what was
used, or a release if nothing was delivered; a charge the ledger could not record is owed and
submitted again later (a second charge of the same request is refused by the ledger's once-only
index: ``AlreadyCharged``).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar, cast

from app.ledger.results import Charged
from app.ledger.service import LedgerService, TeamRequest
from app.ledger.writer import LedgerUnavailable, LedgerWriter, RefusedByStore, Scheduling
from app.store.event_store import LedgerStore
from app.store.writer_lock import WriterLock
from domain import clock
from domain.credit_lots import PAID_FOREVER, PROMOTIONAL, LotTerms
from domain.ledger import AlreadyCharged, HoldNotFound, InsufficientCredits, TeamLedger, team_id
from domain.ledger_holds import Delivery
from domain.pricing import Price
from domain.usage import TokenUsage
from scripts.simulate.budgets import DailyBudgets
from scripts.simulate.faulty_store import FaultCounts, FaultRates, FaultyStore
from scripts.simulate.holds import HoldBook
from scripts.simulate.lifecycle import (
    MODEL,
    Lease,
    charge_again_refused,
    check_snapshot,
    fail_leased,
    freeze,
    heartbeat,
    return_idle,
    settle_leased,
    start_leased,
    take_for_dead,
    wake,
)

R = TypeVar("R")
PRICE = Price(input=Decimal(0), output=Decimal(10), cache_create=Decimal(0), cache_hit=Decimal(0))
CREDITS_PER_USD = Decimal(100)
MICROS_PER_TOKEN = 1_000  # at PRICE: $10 per million output tokens, 100 credits a dollar
HOLD_TIMEOUT = 900.0
MAX_CLOCK_OFFSET = 2.0  # seconds a process's ledger clock may run ahead of the world's
START = datetime(2026, 1, 1, tzinfo=UTC)


class Violation(AssertionError):
    """An invariant that did not hold: the message says which, and how."""


@dataclass
class Request:
    request_id: str
    team: str
    process: int
    held: int
    lease: str = ""  # held in the process's memory against this lease ("": a hold of its own)


@dataclass
class Process:
    """One gateway process: its writer and service, the requests it serves, the charges it owes."""

    owner: str
    writer: LedgerWriter
    service: LedgerService
    in_flight: list[Request] = field(default_factory=list)
    owed: list[tuple[Request, TokenUsage]] = field(default_factory=list)
    leases: dict[str, Lease] = field(default_factory=dict)  # team → its lease, as the book keeps it
    frozen: bool = False
    report: list[Delivery] = field(default_factory=list)  # what its streams had delivered at its last heartbeat
    clock_offset: float = 0.0  # seconds its host's ledger clock runs ahead of the world's


class World:
    """Processes, teams and a clock, all driven by one seed."""

    def __init__(
        self, seed: int, database: Path, *, processes: int = 3, teams: int = 3, rates: FaultRates | None = None
    ):
        self.seed = seed
        self.rng = random.Random(seed)
        self.now = START
        self.offset = timedelta()  # the acting process's clock offset (its host's clock runs ahead)
        clock.run_on(lambda: self.now + self.offset)
        from app.store.event_store import open_ledger_store

        self.real_store = open_ledger_store(f"sqlite:///{database}", database.parent, pool_size=1)
        self.faults = FaultCounts()
        self.store = FaultyStore(self.real_store, self.rng, rates or FaultRates(), self.faults, self.advance)
        self.teams = [f"team-{i}" for i in range(teams)]
        self.budgets = DailyBudgets()
        self.holds = HoldBook()
        for name in self.teams:
            team = TeamLedger.open(name)
            low, high = self.rng.choice([(5_000, 100_000), (100_000, 2_000_000)])  # some teams run short
            team.add_credits(self.rng.randrange(low, high), "opening")
            self.budgets.maybe_set(team, self.rng)
            self.real_store.save_teams([team])
        self.credited: dict[str, int] = dict.fromkeys(self.teams, 0)  # from the stored events, as checked
        self.spent: dict[str, int] = dict.fromkeys(self.teams, 0)
        self.serial = 0
        self.price, self.credits_per_usd, self.micros_per_token = PRICE, CREDITS_PER_USD, MICROS_PER_TOKEN
        #: Processes crashed or frozen that no live one took for dead yet: what their streams had
        #: delivered at their last report. Then the ones taken for dead, and leases nobody gave back.
        self.silent: dict[str, list[Delivery]] = {}
        self.taken_for_dead: set[str] = set()
        self.orphans: set[str] = set()
        self.team_of: dict[str, str] = {}  # request id → its team
        self.processes: list[Process | None] = []
        for _ in range(processes):
            self.processes.append(self._new_process())
        self.answered: dict[str, int] = {}  # request id → what its client was told it was charged
        self.trace: list[str] = []
        self.steps = 0
        self._seen: dict[str, int] = dict.fromkeys(self.teams, 0)  # events checked, per team
        self._charged: dict[str, int] = {}  # request id → charged, from the stored events

    # -- the simulated parts -------------------------------------------------------------------

    def _new_process(self, *, gateway: bool = True) -> Process:
        """A gateway process: as several on one ledger run (``redis_url`` set), it takes its turns
        under the writer lock, each team caught up first (``app/ledger/turns.py``). ``gateway``
        False: a writer of its own without the lock, as ``tollgate credits add`` writes."""
        self.serial += 1
        scheduling = Scheduling(backoff=self._backoff, loaders=0)
        lock = WriterLock(self.real_store.database) if gateway else None
        store = cast(LedgerStore, self.store)
        snapshot_every = self.rng.choice([None, 3, 7])  # some processes snapshot the teams they write
        writer = LedgerWriter(store, lock=lock, snapshot_every=snapshot_every, scheduling=scheduling).driven()
        offset = self.rng.choice([0.0, 0.0, 1.0, MAX_CLOCK_OFFSET])  # hosts' clocks apart, never behind
        return Process(f"p{self.serial}", writer, LedgerService(writer, HOLD_TIMEOUT), clock_offset=offset)

    def _backoff(self, attempt: int) -> None:
        """A lost version race waits in simulated time only."""
        self.advance(self.rng.uniform(0, 0.002 * 2 ** min(attempt, 6)))

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def run(self, process: Process, submitted: Future[R]) -> R:
        """The process's writer decides and commits what was submitted (on this one thread)."""
        self.offset = timedelta(seconds=process.clock_offset)
        try:
            process.writer.drain()
        finally:
            self.offset = timedelta()
        if not submitted.done():
            raise Violation("a command was not decided when its writer drained its queue")
        try:
            return submitted.result()
        except RefusedByStore as exc:  # the database's own checks refused what the ledger decided
            raise Violation(f"the store refused what {process.owner}'s ledger decided: {exc}") from None

    def team_request(self, request: Request) -> TeamRequest:
        return TeamRequest(team_id(request.team), request.team, request.request_id, "key", MODEL, "chat")

    def live(self) -> list[tuple[int, Process]]:
        return [(i, p) for i, p in enumerate(self.processes) if p is not None]

    def awake(self) -> list[tuple[int, Process]]:
        return [(i, p) for i, p in self.live() if not p.frozen]

    # -- the steps -----------------------------------------------------------------------------

    def step(self) -> None:
        """One step: time passes, then one thing happens, then the invariants are checked."""
        self.steps += 1
        self.store.next_step()
        self.advance(self.rng.uniform(0.001, 0.2))
        actions: list[tuple[float, Callable[[], str]]] = [
            (40, self._start_request),
            (40, self._finish_request),
            (4, self._pay_owed),
            (3, self._sweep),
            (2, self._top_up),
            (4, lambda: return_idle(self)),
            (6, lambda: heartbeat(self)),
            (2, lambda: take_for_dead(self)),
            (1, lambda: freeze(self)),
            (2, lambda: wake(self)),
            (1, self._crash),
            (1, self._jump),
            (1, self._read_only),
        ]
        action = self.rng.choices([a for _, a in actions], weights=[w for w, _ in actions])[0]
        self.trace.append(f"{self.steps}: {action()}")
        self.check()

    def _start_request(self) -> str:
        index, process = self.rng.choice(self.awake())
        name = self.rng.choice(self.teams)
        request = Request(f"req-{self.seed}-{self.steps}", name, index, self.rng.randrange(1_000, 60_000))
        self.team_of[request.request_id] = name
        if self.rng.random() < 0.5:
            return start_leased(self, process, request)
        try:
            self.run(process, process.service.hold(self.team_request(request), request.held, owner=process.owner))
        except InsufficientCredits:
            return f"{process.owner} refused {request.request_id} on {name}: insufficient credits"
        except LedgerUnavailable as exc:
            return f"{process.owner} refused {request.request_id} on {name}: {exc}"
        process.in_flight.append(request)
        return f"{process.owner} held {request.held} for {request.request_id} on {name}"

    def _finish_request(self) -> str:
        busy = [(i, p) for i, p in self.awake() if p.in_flight]
        if not busy:
            return "nothing in flight"
        _, process = self.rng.choice(busy)
        request = process.in_flight.pop(self.rng.randrange(len(process.in_flight)))
        if self.rng.random() < 0.15:
            return fail_leased(self, process, request) if request.lease else self._release(process, request)
        most = request.held // MICROS_PER_TOKEN + 1  # what the hold covers; a fifth of answers use more
        tokens = self.rng.randrange(0, most) if self.rng.random() < 0.8 else self.rng.randrange(most, 3 * most + 1)
        return self._charge(process, request, TokenUsage(0, tokens))

    def _charge(self, process: Process, request: Request, usage: TokenUsage) -> str:
        submitted = process.service.charge(
            self.team_request(request), usage, PRICE, CREDITS_PER_USD, lease=request.lease
        )
        try:
            charged = self.run(process, submitted)
        except (AlreadyCharged, HoldNotFound) as exc:
            settle_leased(process, request, None)
            return charge_again_refused(process, request, exc)
        except LedgerUnavailable as exc:
            settle_leased(process, request, None)  # its part of the lease ends in memory; the charge is owed
            request.held = 0
            process.owed.append((request, usage))
            return f"{process.owner} owes the charge of {request.request_id} ({exc})"
        assert isinstance(charged, Charged)
        settle_leased(process, request, charged)
        self.answered[request.request_id] = charged.event.charged
        if self.rng.random() < 0.05:  # the same charge delivered to the ledger again (a retry, a duplicate)
            return self._charge_again(process, request, usage, charged.event.charged)
        return f"{process.owner} charged {request.request_id} {charged.event.charged}"

    def _charge_again(self, process: Process, request: Request, usage: TokenUsage, first: int) -> str:
        self.faults.add("message duplicated")
        again = process.service.charge(self.team_request(request), usage, PRICE, CREDITS_PER_USD, lease=request.lease)
        try:
            self.run(process, again)
        except (AlreadyCharged, HoldNotFound, LedgerUnavailable) as exc:
            return f"{process.owner} charged {request.request_id} {first}; its duplicate: {type(exc).__name__}"
        raise Violation(f"{request.request_id}: its charge, delivered twice, was taken twice")

    def _read_only(self) -> str:
        steps = self.rng.randrange(2, 12)
        self.store.read_only_for(steps)
        return f"the database turned read-only for {steps} steps"

    def _release(self, process: Process, request: Request) -> str:
        try:
            self.run(process, process.service.release(self.team_request(request), "upstream failed"))
        except (LedgerUnavailable, HoldNotFound) as exc:
            return f"{process.owner} could not release {request.request_id}: {type(exc).__name__}"
        return f"{process.owner} released {request.request_id}"

    def _pay_owed(self) -> str:
        owing = [p for _, p in self.awake() if p.owed]
        if not owing:
            return "nothing owed"
        process = self.rng.choice(owing)
        owed, process.owed = process.owed, []
        said = [self._charge(process, request, usage) for request, usage in owed]
        return f"{process.owner} paid what it owed: " + "; ".join(said)

    def _sweep(self) -> str:
        _, process = self.rng.choice(self.awake())
        released: list[str] = []
        for name in self.teams:
            submitted = process.service.release_expired(team_id(name), name, self.now.timestamp(), HOLD_TIMEOUT)
            with contextlib.suppress(LedgerUnavailable):
                released += self.run(process, submitted).held_by
        return f"{process.owner} swept: released {', '.join(released) or 'nothing'}"

    def _top_up(self) -> str:
        name = self.rng.choice(self.teams)
        amount = self.rng.randrange(10_000, 500_000)
        terms = PAID_FOREVER
        if self.rng.random() < 0.4:  # a promotional lot that expires soon, used before the paid credit
            expires = self.now + timedelta(seconds=self.rng.uniform(5, 600))
            terms = LotTerms(PROMOTIONAL, expires.replace(microsecond=0), priority=1)
        other = self._new_process(gateway=False)  # `tollgate credits add`: a writer of its own, briefly
        submitted = other.writer.submit(team_id(name), _adding(amount, terms))
        try:
            self.run(other, submitted)
        except LedgerUnavailable:
            return f"top-up of {amount} on {name} failed"
        finally:
            other.writer.stop()
        return f"top-up of {amount} on {name}"

    def _crash(self) -> str:
        index, process = self.rng.choice(self.awake())
        lost = [r.request_id for r in process.in_flight] + [r.request_id for r, _ in process.owed]
        self.silent[process.owner] = process.report  # what it said at its last heartbeat, maybe stale
        self.faults.add("process crashed")
        process.writer.stop()  # its memory is gone: only its lock's file is closed
        self.processes[index] = self._new_process()
        return f"{process.owner} crashed, losing {', '.join(lost) or 'nothing'}; {self.processes[index].owner} started"  # type: ignore[union-attr]

    def _jump(self) -> str:
        seconds = self.rng.choice([30.0, 300.0, HOLD_TIMEOUT + 1])
        self.advance(seconds)
        self.faults.add("clock jump")
        return f"the clock jumped {seconds:.0f} s"

    # -- the invariants ------------------------------------------------------------------------

    def check(self) -> None:
        for name in self.teams:
            replayed, _ = self.real_store.load_team(team_id(name))
            assert replayed is not None
            self._check_events(name, replayed)
            if self.steps % 10 == 0:
                check_snapshot(self, name, replayed)
            for _, process in self.live():
                self._check_copy(process, name, replayed)
        for request_id, told in self.answered.items():
            found = self._charged.get(request_id)
            if found != told:
                raise Violation(f"{request_id}: its client was told {told} was charged; the ledger has {found}")

    def _check_events(self, name: str, replayed: TeamLedger) -> None:
        for event in self.real_store.events_after(team_id(name), self._seen[name]):
            if (wrong := self.holds.see(name, event)) is not None:
                raise Violation(wrong)
            if isinstance(event, TeamLedger.Charged):
                if event.request_id in self._charged:
                    raise Violation(f"{event.request_id} was charged twice (version {event.originator_version})")
                self._charged[event.request_id] = event.charged
                self.spent[name] += event.charged
                if (past := self.budgets.count(name, event)) is not None:
                    raise Violation(past)
            elif isinstance(event, TeamLedger.CreditsAdded):
                self.credited[name] += event.amount - event.owed_paid
            elif isinstance(event, TeamLedger.CreditsExpired):
                self.credited[name] -= event.amount  # written off at its lot's expiry
            self._seen[name] = event.originator_version
        if replayed.balance < 0 or replayed.held < 0 or replayed.held > replayed.balance:
            raise Violation(f"{name}: balance {replayed.balance}, held {replayed.held}: spent past its balance")
        if self.credited[name] - self.spent[name] != replayed.balance:
            raise Violation(
                f"{name}: credited {self.credited[name]} − charged {self.spent[name]} ≠ its balance {replayed.balance}"
            )

    def _check_copy(self, process: Process, name: str, replayed: TeamLedger) -> None:
        cached = process.writer.copy_of(team_id(name))
        if cached is None:
            return
        copy = cached.fork()
        for event in self.real_store.newer_events(copy):
            event.mutate(copy)
        mine = (copy.version, copy.balance, copy.held, sorted(copy.holds))
        theirs = (replayed.version, replayed.balance, replayed.held, sorted(replayed.holds))
        if mine != theirs:
            raise Violation(f"{process.owner}'s copy of {name}, caught up, is {mine}; a replay gives {theirs}")

    def settle(self) -> None:
        """Traffic stops: what is owed is paid without faults, every hold outlives its timeout and is
        swept; then nothing may be held, and every answered request is charged as its client was told."""
        self.store.enabled = False
        for _, process in self.live():
            if process.frozen:
                wake(self)
        for _, process in self.live():
            owed, process.owed = process.owed, []
            for request, usage in owed:
                self._charge(process, request, usage)
            process.in_flight.clear()  # their clients gave up: the sweeper releases their holds
            for name, lease in list(process.leases.items()):  # at stop, the leases go back
                process.leases.pop(name)
                self.run(process, process.service.return_lease(team_id(name), name, lease.lease_id))
        self.advance(HOLD_TIMEOUT + 1 + MAX_CLOCK_OFFSET)  # past the timeout on every host's clock
        self._sweep()
        self.check()
        for name in self.teams:
            replayed, _ = self.real_store.load_team(team_id(name))
            assert replayed is not None
            if replayed.held or replayed.holds:
                raise Violation(f"{name}: {replayed.held} still held by {sorted(replayed.holds)} after traffic stopped")

    def close(self) -> None:
        for _, process in self.live():
            process.writer.stop()
        clock.run_on(None)
        self.real_store.close()


def _adding(amount: int, terms: LotTerms) -> Any:
    def command(team: TeamLedger | None) -> tuple[TeamLedger, Any]:
        from app.ledger.writer import Recorded

        assert team is not None
        team.add_credits(amount, "top-up", terms=terms)
        return team, Recorded(None)

    return command
