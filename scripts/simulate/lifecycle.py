"""The simulated world's credit leases, processes taken for dead, and snapshots.

- **Leases**: half the requests are held in a process's memory against its credit lease on the team,
  as ``app/ledger/leases.py`` holds them: the lease grows on the ledger (``LedgerService.lease``) when
  what is free in it cannot cover a request; the request is charged against it (``lease=``) or its
  failure recorded; an idle lease is given back (``return_lease``).
- **Taken for dead**: a crashed or frozen process's owner is released by a live one
  (``release_abandoned``), which charges its streams for what they had delivered at its last report
  and releases its holds and leases. A frozen process then wakes: its requests go on (their charges
  are refused as charged before, or come out of the available balance), and, finding it was taken
  for dead, it gives back every lease in its book, as the gateway does.
- **Snapshots**: processes take team snapshots every few events; a team loaded from its snapshot and
  newer events must equal the replay of all its events.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, cast

from app.ledger.results import Charged, Leased
from app.ledger.writer import LedgerUnavailable
from domain.ledger import AlreadyCharged, HoldNotFound, InsufficientCredits, TeamLedger, team_id
from domain.ledger_holds import Delivery
from domain.usage import TokenUsage

if TYPE_CHECKING:
    from scripts.simulate.world import Process, Request, World

MODEL = "sim-model"


@dataclass
class Lease:
    """A process's lease on a team, as its book keeps it: what the ledger holds for it, and how much
    of that its requests in flight hold."""

    lease_id: str
    remaining: int = 0
    reserved: int = 0


def start_leased(world: World, process: Process, request: Request) -> str:
    """Hold ``request`` against the process's lease on its team, growing the lease first if need be."""
    lease = process.leases.get(request.team)
    if lease is None:
        world.serial += 1
        lease = process.leases[request.team] = Lease(f"lease-{process.owner}-{world.serial}")
    free = lease.remaining - lease.reserved
    if free < request.held:
        wanted = max(4 * request.held, 2 * (lease.reserved + request.held))
        submitted = process.service.lease(
            team_id(request.team), request.team, lease.lease_id, request.held - free, wanted, process.owner
        )
        try:
            grown = world.run(process, submitted)
        except (InsufficientCredits, LedgerUnavailable) as exc:
            return f"{process.owner} refused {request.request_id} on {request.team}: {type(exc).__name__}"
        assert isinstance(grown, Leased)
        # what the ledger holds for it now (less than the book thought, if a sweep released it meanwhile:
        # its requests then settle from the available balance, as the gateway's do)
        lease.remaining = grown.remaining
    lease.reserved += request.held
    request.lease = lease.lease_id
    process.in_flight.append(request)
    return f"{process.owner} held {request.held} for {request.request_id} on {request.team} in {lease.lease_id}"


def settle_leased(process: Process, request: Request, charged: Charged | None) -> None:
    """A leased request is done: its part of the lease is free again, and the lease holds what its
    charge left (if it was charged against it)."""
    lease = process.leases.get(request.team)
    if lease is None or lease.lease_id != request.lease:
        return  # the book forgot it (the process was taken for dead): its charge came out of the balance
    lease.reserved -= request.held
    if charged is not None and charged.lease_left is not None:
        lease.remaining = charged.lease_left


def fail_leased(world: World, process: Process, request: Request) -> str:
    """Record a leased request's failure (nothing delivered); its hold ends in the process's memory."""
    submitted = process.service.record_failure(world.team_request(request), request.lease, "upstream failed")
    with contextlib.suppress(LedgerUnavailable):  # the failure is the history's; the hold ended in memory
        world.run(process, submitted)
    settle_leased(process, request, None)
    return f"{process.owner} recorded the failure of {request.request_id}"


def return_idle(world: World) -> str:
    """A process gives back one of its leases that nothing in flight holds."""
    idle = [(p, name) for _, p in world.awake() for name, lease in p.leases.items() if lease.reserved == 0]
    if not idle:
        return "no idle lease"
    process, name = world.rng.choice(idle)
    lease = process.leases.pop(name)
    try:
        world.run(process, process.service.return_lease(team_id(name), name, lease.lease_id))
    except LedgerUnavailable:
        return f"{process.owner} could not give back {lease.lease_id} (it is released like an abandoned hold)"
    return f"{process.owner} gave back {lease.lease_id}"


def deliveries(world: World, requests: list[Request]) -> list[Delivery]:
    """What a process's streams in flight had delivered at its last report (a share of each hold)."""
    found = []
    for request in requests:
        if world.rng.random() < 0.5:
            tokens = world.rng.randrange(0, request.held // world.micros_per_token + 1)
            found.append(Delivery(request.request_id, "key", MODEL, "chat", TokenUsage(0, tokens), request.lease))
    return found


def heartbeat(world: World) -> str:
    """A process reports what its streams in flight have delivered (the gateway's heartbeat); a
    process that dies or freezes later is released with this report, stale by then: a stream it
    charged after the report must not be charged again."""
    awake = world.awake()
    if not awake:
        return "no process awake"
    _, process = world.rng.choice(awake)
    process.report = deliveries(world, process.in_flight)
    return f"{process.owner} reported {len(process.report)} stream(s) delivering"


def take_for_dead(world: World) -> str:
    """A live process releases what a crashed or frozen one held, charging its streams for what they
    had delivered at its last report."""
    gone = [(owner, reported) for owner, reported in world.silent.items()]
    awake = world.awake()
    if not gone or not awake:
        return "no process to take for dead"
    owner, reported = world.rng.choice(gone)
    _, process = world.rng.choice(awake)
    released: list[str] = []
    for name in world.teams:
        mine = [d for d in reported if world.team_of.get(d.request_id) == name]
        submitted = process.service.release_abandoned(
            team_id(name), name, [owner], mine, {MODEL: world.price}, Decimal(world.credits_per_usd)
        )
        try:
            released += world.run(process, submitted).held_by
        except LedgerUnavailable:
            return f"{process.owner} could not take {owner} for dead yet (the ledger is away)"
        except Exception as exc:  # noqa: BLE001 - the sweep itself failed: the dead process's holds would stay held
            from scripts.simulate.world import Violation

            raise Violation(f"{process.owner} could not take {owner} for dead on {name}: {exc!r}") from None
    del world.silent[owner]
    world.taken_for_dead.add(owner)
    return f"{process.owner} took {owner} for dead: released {', '.join(released) or 'nothing'}"


def freeze(world: World) -> str:
    awake = world.awake()
    if len(awake) < 2:
        return "no process to freeze"
    _, process = world.rng.choice(awake)
    process.frozen = True
    world.silent[process.owner] = process.report
    world.faults.add("process frozen")
    return f"{process.owner} froze with {len(process.in_flight)} request(s) in flight"


def wake(world: World) -> str:
    frozen = [p for _, p in world.live() if p.frozen]
    if not frozen:
        return "no process frozen"
    process = world.rng.choice(frozen)
    process.frozen = False
    world.silent.pop(process.owner, None)  # not taken for dead yet: its heartbeat resumes in time
    if process.owner not in world.taken_for_dead:
        return f"{process.owner} woke up"
    given = []
    for name, lease in list(process.leases.items()):  # app/ledger/leases.py: forget_all gives its book back
        process.leases.pop(name)
        try:
            world.run(process, process.service.return_lease(team_id(name), name, lease.lease_id))
            given.append(lease.lease_id)
        except LedgerUnavailable:
            world.orphans.add(lease.lease_id)  # left to the holds' timeout, like an abandoned hold
    return f"{process.owner} woke up, found it was taken for dead, gave back {', '.join(given) or 'no lease'}"


def charge_again_refused(process: Process, request: Request, exc: Exception) -> str:
    kind = "charged before" if isinstance(exc, AlreadyCharged) else "its hold was released first"
    assert isinstance(exc, AlreadyCharged | HoldNotFound)
    return f"{process.owner} charged {request.request_id}: refused, {kind}"


def check_snapshot(world: World, name: str, loaded: TeamLedger) -> None:
    """The team loaded from its newest snapshot and newer events equals the replay of all its events."""
    from scripts.simulate.world import Violation

    replayed: TeamLedger | None = None
    for event in world.real_store.events_after(team_id(name), 0):
        replayed = cast(TeamLedger, event.mutate(replayed))
    assert replayed is not None
    mine = (loaded.version, loaded.balance, loaded.held, sorted(loaded.holds))
    theirs = (replayed.version, replayed.balance, replayed.held, sorted(replayed.holds))
    if mine != theirs:
        raise Violation(f"{name} loaded from its snapshot is {mine}; the replay of its events gives {theirs}")
