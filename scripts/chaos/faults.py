"""The fault schedule: what breaks when, and a record of each fault as it really happened.

Faults run at fixed offsets into the load phase (a profile's schedule), in the same event loop as
the traffic; anything that blocks (``pg_ctl``, the ``tollgate`` command, starting a gateway) runs in
a worker thread so requests keep flowing meanwhile. Each fault is recorded with the wall-clock
time it began and ended, because the verdict judges answers by when they happened: a 503 saying
the ledger is away is documented only while the database is, and the holds of a killed process
must be gone within 30 s of its death.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

from scripts.chaos.clusters import PostgresCluster, RedisServer
from scripts.chaos.gateways import GatewayProcess
from scripts.chaos.host_faults import CUT_BOTH, CUT_POSTGRES, CUT_REDIS, FREEZE, HOST_FAULTS, LOSSY, HostFaults
from scripts.chaos.load import Load
from scripts.chaos.teams import Operator, Team

#: Fault kinds, as recorded.
KILL = "kill -9 gateway"
POSTGRES_RESTART = "postgres restart"
POSTGRES_REFUSING = "postgres refusing connections"
REDIS_RESTART = "redis restart"
TOP_UPS = "cli top-ups"
REVOCATIONS = "cli key revocations"
#: Seconds the database refuses connections.
REFUSAL_SECONDS = 5.0
#: Seconds a killed gateway stays dead before it is started again.
DEAD_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Step:
    at: float  # seconds into the load phase
    kind: str
    option: str = ""  # the kill's victim (a gateway index), the restart's mode, …


@dataclass
class Fault:
    """A fault as it happened (Unix times)."""

    kind: str
    started: float
    ended: float = 0.0
    detail: str = ""
    #: For a kill: the dead process, and the streams it was delivering when it died.
    pid: int = 0
    streams: int = 0
    victim: int = -1
    back: float = 0.0  # when the restarted gateway was ready again


@dataclass
class Injector:
    """Runs a schedule against the suite's servers while ``load`` runs."""

    postgres: PostgresCluster
    database: str
    redis: RedisServer
    gateways: list[GatewayProcess]
    operator: Operator
    teams: list[Team]
    load: Load
    rng: random.Random
    faults: list[Fault] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # a fault that could not be injected fails the run
    hosts: HostFaults | None = None  # the multi-host suite's faults between hosts
    #: Faults between hosts last seconds; each runs beside the schedule, which goes on meanwhile.
    _lasting: list[asyncio.Task[None]] = field(default_factory=list)
    _revocable: list[Team] = field(default_factory=list)

    async def run(self, schedule: list[Step]) -> None:
        self._revocable = [team for team in self.teams if not team.poor]
        self.rng.shuffle(self._revocable)
        for step in schedule:
            delay = self.load.started + step.at - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                await self._inject(step)
            except Exception as exc:  # noqa: BLE001 - reported as the run's failure, with its reason
                self.errors.append(f"{step.kind} at {step.at:.0f} s could not be injected: {type(exc).__name__}: {exc}")
                if self.faults and not self.faults[-1].ended:
                    self.faults[-1].ended = time.time()
        for lasting in self._lasting:
            await lasting

    async def _inject(self, step: Step) -> None:
        if step.kind == KILL:
            await self._kill(int(step.option or 0))
        elif step.kind == POSTGRES_RESTART:
            streams = await self._streams_delivering()
            fault = self._begin(step.kind, f"pg_ctl restart -m {step.option or 'fast'}, {streams} stream(s) delivering")
            await asyncio.to_thread(self.postgres.restart, step.option or "fast")
            fault.ended = time.time()
        elif step.kind == POSTGRES_REFUSING:
            streams = await self._streams_delivering()
            fault = self._begin(
                step.kind,
                f"ALTER DATABASE ... ALLOW_CONNECTIONS false for {REFUSAL_SECONDS:.0f} s, "
                f"{streams} stream(s) delivering",
            )
            refusing = self.postgres.refusing_connections(self.database)
            await asyncio.to_thread(refusing.__enter__)
            try:
                await asyncio.sleep(REFUSAL_SECONDS)
            finally:
                await asyncio.to_thread(refusing.__exit__, None, None, None)
            fault.ended = time.time()
        elif step.kind == REDIS_RESTART:
            fault = self._begin(step.kind, "redis-server stopped (SIGTERM) and started again, empty")
            await asyncio.to_thread(self.redis.restart)
            fault.ended = time.time()
        elif step.kind in HOST_FAULTS and self.hosts is not None:
            host = int(step.option or 0)
            fault = self._begin(step.kind, self.hosts.describe(step.kind, host))
            fault.victim = host
            fault.pid = self.gateways[host].pid
            self._lasting.append(asyncio.get_running_loop().create_task(self._between_hosts(step, fault)))
        elif step.kind == TOP_UPS:
            await self._operate(step.kind, int(step.option or 3))
        elif step.kind == REVOCATIONS:
            await self._operate(step.kind, int(step.option or 2))
        else:
            raise ValueError(f"unknown fault {step.kind!r}")

    async def _between_hosts(self, step: Step, fault: Fault) -> None:
        assert self.hosts is not None
        try:
            await self.hosts.inject(step.kind, fault.victim)
        except Exception as exc:  # noqa: BLE001 - reported as the run's failure, with its reason
            self.errors.append(f"{step.kind} at {step.at:.0f} s could not be injected: {type(exc).__name__}: {exc}")
        fault.ended = time.time()

    def _begin(self, kind: str, detail: str) -> Fault:
        fault = Fault(kind, time.time(), detail=detail)
        self.faults.append(fault)
        return fault

    async def _streams_delivering(self, gateway: int | None = None, wanted: int = 2, within: float = 8) -> int:
        """Wait (a few seconds at most) until ``wanted`` streams are delivering — on ``gateway``, or
        anywhere — so that the fault cuts into them; returns how many there are."""

        def count() -> int:
            return self.load.streaming.get(gateway, 0) if gateway is not None else sum(self.load.streaming.values())

        deadline = time.time() + within
        while count() < wanted and time.time() < deadline:  # noqa: ASYNC110 (a count other tasks move, not an event)
            await asyncio.sleep(0.02)
        return count()

    async def _kill(self, victim: int) -> None:
        """``kill -9`` the victim while it is delivering streams, then start it again on the same port."""
        gateway = self.gateways[victim]
        streams = await self._streams_delivering(victim) or await self._streams_delivering(victim, 1, 12)
        pid = gateway.process.pid if gateway.process else 0
        fault = self._begin(KILL, f"gateway {victim} (pid {pid}) with {streams} stream(s) delivering")
        fault.pid, fault.streams, fault.victim = pid, streams, victim
        gateway.kill()
        fault.ended = time.time()
        await asyncio.sleep(DEAD_SECONDS)
        gateway.launch()
        await asyncio.to_thread(gateway.wait_ready)
        fault.back = time.time()

    async def _operate(self, kind: str, count: int) -> None:
        fault = self._begin(kind, "")
        done = []
        for _ in range(count):
            if kind == TOP_UPS:
                team = self.rng.choice([t for t in self.teams if t.poor])
                action = await asyncio.to_thread(self.operator.top_up, team.name)
            else:
                if not self._revocable:
                    break
                team = self._revocable.pop()
                action = await asyncio.to_thread(self.operator.revoke, team.name, team.key_ids[1])
            done.append(f"{action.team} {action.argument}{'' if action.ok else ' (FAILED)'}")
        fault.ended = time.time()
        fault.detail = ", ".join(done)


def schedule_for_hosts(long: bool) -> list[Step]:
    """The multi-host suite's faults: the single host's (a kill, the database restarted and refusing
    connections, Redis restarted, operators' top-ups and revocations) and, beside them, each fault
    between hosts once, on different hosts (the long mode: three cycles, the victims moving on)."""
    steps = []
    for cycle in range(3 if long else 1):
        base = cycle * 95.0
        victim = [str((cycle + n) % 3) for n in range(3)]
        steps += [
            Step(base + 3, CUT_POSTGRES, victim[1]),
            Step(base + 8, KILL, victim[2]),
            Step(base + 13, TOP_UPS, "3"),
            Step(base + 14, REVOCATIONS, "2"),
            Step(base + 17, CUT_REDIS, victim[0]),
            Step(base + 22, POSTGRES_RESTART, "immediate" if cycle == 1 else "fast"),
            Step(base + 27, LOSSY, victim[2]),
            Step(base + 30, REDIS_RESTART),
            Step(base + 34, FREEZE, victim[1]),
            Step(base + 36, POSTGRES_REFUSING),
            Step(base + 44, CUT_BOTH, victim[0]),
            Step(base + 46, TOP_UPS, "3"),
            Step(base + 47, REVOCATIONS, "2"),
        ]
    return steps


def schedule_for(long: bool) -> list[Step]:
    """The faults of a run: the CI mode's, about a minute of load; the long mode's, five minutes."""
    if not long:
        return [
            Step(8, KILL, "1"),
            Step(13, TOP_UPS, "3"),
            Step(14, REVOCATIONS, "2"),
            Step(22, POSTGRES_RESTART),
            Step(30, REDIS_RESTART),
            Step(36, POSTGRES_REFUSING),
            Step(46, TOP_UPS, "3"),
            Step(47, REVOCATIONS, "2"),
        ]
    steps = []
    for cycle in range(3):
        base = cycle * 95.0
        steps += [
            Step(base + 10, KILL, str(cycle % 3)),
            Step(base + 22, TOP_UPS, "4"),
            Step(base + 24, REVOCATIONS, "2"),
            Step(base + 32, POSTGRES_RESTART, "immediate" if cycle == 1 else "fast"),
            Step(base + 45, REDIS_RESTART),
            Step(base + 58, POSTGRES_REFUSING),
            Step(base + 72, TOP_UPS, "4"),
        ]
    return steps
