"""One chaos run, start to verdict: servers up, teams opened, traffic and faults together, the ledger
settled and read, every check, the summary line, everything torn down.

Everything the run starts is its own and goes away with it (the PostgreSQL cluster, Redis, the
fake upstream, the gateways), whatever happens: a run that fails keeps its folder — logs, the
attempts, the events, the faults — and says where it is, so a violation can be read afterwards.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from scripts.chaos.answers import check_answers
from scripts.chaos.charges import ChargeChecks, Prices
from scripts.chaos.clusters import PostgresCluster, RedisServer
from scripts.chaos.faults import KILL, Fault, Injector, Step, schedule_for, schedule_for_hosts
from scripts.chaos.gateways import FakeUpstreamProcess, GatewayProcess, run_cli, write_config
from scripts.chaos.host_faults import CLOCK, DEAD_AFTER, HostFaults, host_clock, offsets_note
from scripts.chaos.invariants import (
    DEAD_RELEASE_SECONDS,
    check_budgets,
    check_dead_holds,
    check_nothing_held,
    check_sums,
    replay,
)
from scripts.chaos.ledger import Snapshot, read_snapshot, wait_until_nothing_held
from scripts.chaos.load import Load
from scripts.chaos.logs import log_problems
from scripts.chaos.netns import Topology
from scripts.chaos.record import RunRecord
from scripts.chaos.teams import Operator, open_teams
from scripts.chaos.traffic import Plan, plan_traffic
from scripts.chaos.verdict import Verdict, summary_line

GATEWAYS = 3
DATABASE = "tollgate"
#: The CI mode's seed unless one is given: the same traffic on every run, so that a failure is the
#: gateway's and not the draw's.
CI_SEED = 14


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    requests: int
    teams: int
    duration: float  # seconds of load
    concurrency: int  # requests in flight at most
    poor_every: int  # every n-th team is poor
    long: bool


CI = Profile("ci", 1100, 50, 60.0, 64, 5, long=False)
LONG = Profile("long", 6000, 100, 290.0, 96, 4, long=True)


def say(text: str) -> None:
    print(f"  {text}", flush=True)


def run(seed: int | None, long: bool, keep: bool, faults: bool = True, hosts: int = 0) -> int:
    """One run; ``hosts``: that many gateway hosts, each in a network namespace of its own, with the
    faults between hosts (``netns.py``, ``host_faults.py``); 0: the single-host suite."""
    profile = LONG if long else CI
    seed = seed if seed is not None else (random.randrange(1, 1_000_000) if long else CI_SEED)
    _announce(profile, seed, faults, hosts)
    folder = Path(tempfile.mkdtemp(prefix="tollgate-chaos-"))
    folder.chmod(0o755)  # the postgres user reaches its cluster inside
    signal.signal(signal.SIGTERM, _stop_by_exception)
    started = time.monotonic()
    topology = Topology(hosts) if hosts else None
    count = hosts or GATEWAYS
    gateways: list[GatewayProcess] = []
    postgres, redis, upstream = _servers(folder, topology)
    failed = True
    try:
        _build(topology)
        postgres.init().start()
        database_url = postgres.create_database(DATABASE)
        redis.start()
        upstream.start()
        config = write_config(folder, database_url, redis.url, upstream.url, _mode_settings(topology))
        teams = open_teams(database_url, folder, profile.teams, profile.poor_every)
        gateways = [_gateway(i, config, topology) for i in range(count)]
        for gateway in gateways:
            gateway.launch()
        for gateway in gateways:
            gateway.wait_ready()
        say(
            f"ready in {time.monotonic() - started:.1f} s: PostgreSQL :{postgres.port}, Redis :{redis.port}, "
            f"upstream :{upstream.port}, gateways {', '.join(f':{g.port}' for g in gateways)}; "
            f"{len(teams)} teams ({sum(t.poor for t in teams)} poor); work folder {folder}"
        )

        plans = plan_traffic(seed, profile.requests, len(teams), count, profile.duration)
        load = Load(
            plans,
            lambda g: gateways[g].url,
            lambda g: gateways[g].pid,
            [t.secrets for t in teams],
            count,
            profile.concurrency,
        )
        operator = Operator(config)
        injector = Injector(postgres, DATABASE, redis, gateways, operator, teams, load, random.Random(seed))
        schedule = _schedule(injector, topology, long) if faults else []

        async def together() -> None:
            await asyncio.gather(load.run(), injector.run(schedule))

        asyncio.run(together())
        say(f"load done in {time.monotonic() - started:.1f} s: {load.sent} requests sent")

        kills = [f.started for f in injector.faults if f.kind == KILL]
        until = max([time.time() + 15, *(k + DEAD_RELEASE_SECONDS + 3 for k in kills)])
        held = wait_until_nothing_held(database_url, folder, until)
        say(f"settled in {time.monotonic() - started:.1f} s{f'; still held: {held}' if held else ''}")
        snapshot = read_snapshot(database_url, folder)
        verify = run_cli(config, "ledger", "verify", timeout=300)
        for line in verify.stdout.splitlines():
            if line.startswith("Transparency log"):  # its checkpoints, signed under the faults, checked
                say(line)
        exits = {g.index: g.stop() for g in gateways}

        record = RunRecord(plans, load.attempts, injector.faults, teams, operator.actions)
        verdict = judge(record, snapshot, config)
        if verify.returncode != 0:
            verdict.fail("ledger verify", (verify.stdout + verify.stderr).strip()[-2000:])
        for index, status in exits.items():
            if status != 0:
                verdict.fail("gateway shutdown", f"gateway {index} exited {status} on SIGTERM")
        for error in injector.errors:
            verdict.fail("fault injection", error)
        _save(folder, plans, load, injector, operator, snapshot)
        _report(verdict, injector, gateways, time.monotonic() - started)
        requests = load.sent
        injected = len([f for f in injector.faults if f.kind not in ("cli top-ups", "cli key revocations")])
        injected += sum(1 for p in plans if p.fault and p.fault != "slow")
        print(summary_line(requests, injected, verdict), flush=True)
        failed = bool(verdict.violations)
        return 1 if failed else 0
    finally:
        for gateway in gateways:
            gateway.stop()
        upstream.stop()
        redis.stop()
        postgres.stop()
        _remove(topology)
        if failed or keep:
            print(f"chaos: kept {folder} (gateway logs, attempts.jsonl, events.jsonl, faults.json)", flush=True)
        else:
            shutil.rmtree(folder, ignore_errors=True)


def _announce(profile: Profile, seed: int, faults: bool, hosts: int) -> None:
    again = f"--seed {seed}{' --long' if profile.long else ''}{'' if faults else ' --no-faults'}"
    again += f" --hosts {hosts}" if hosts else ""
    print(f"chaos: {profile.name} mode, seed {seed} (again: python -m scripts.chaos {again})", flush=True)


def _mode_settings(topology: Topology | None) -> str:
    """The configuration's settings of the multi-host mode: a frozen host is taken for dead sooner."""
    return f"instance_dead_after = {DEAD_AFTER:g}\n" if topology is not None else ""


def _build(topology: Topology | None) -> None:
    if topology is not None:
        topology.build()


def _remove(topology: Topology | None) -> None:
    if topology is not None:
        topology.remove()


def _schedule(injector: Injector, topology: Topology | None, long: bool) -> list[Step]:
    """The faults of the run: the single host's, or, with hosts, the faults between them made
    injectable and the hosts' clock offsets recorded as faults of the whole run."""
    if topology is None:
        return schedule_for(long)
    injector.hosts = HostFaults(topology, injector.gateways)
    say(f"hosts' ledger clocks: {offsets_note(topology.hosts)}")
    for host in range(topology.hosts):
        if host_clock(host):
            at = time.time()
            injector.faults.append(Fault(CLOCK, at, at, f"host {host} {host_clock(host):+.1f} s"))
    return schedule_for_hosts(long)


def _servers(folder: Path, topology: Topology | None) -> tuple[PostgresCluster, RedisServer, FakeUpstreamProcess]:
    """PostgreSQL, Redis and the fake upstream: on loopback, or, with hosts, the database and Redis in
    their namespace and the upstream on the root namespace's address on the bridge."""
    if topology is None:
        return PostgresCluster(folder / "postgres"), RedisServer(folder), FakeUpstreamProcess(folder)
    inside = tuple(topology.prefix(topology.database_namespace))
    return (
        PostgresCluster(folder / "postgres", topology.database_address, inside),
        RedisServer(folder, topology.redis_address, inside),
        FakeUpstreamProcess(folder, address=topology.gateway_address),
    )


def _gateway(index: int, config: Path, topology: Topology | None) -> GatewayProcess:
    """Gateway ``index``: on loopback, or on its own host — its network namespace, its own host name
    (a UTS namespace: the others cannot tell its processes are gone by their pids), its ledger clock."""
    if topology is None:
        return GatewayProcess(index, config)
    name = f"chaos-host-{index}"
    prefix = (
        *topology.prefix(topology.host_namespace(index)),
        "unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', name,
    )  # fmt: skip
    offset = {"TOLLGATE_CLOCK_OFFSET": str(host_clock(index)), "TOLLGATE_CLOCK_DRILL": "1"} if host_clock(index) else {}
    return GatewayProcess(index, config, address=topology.host_address(index), prefix=prefix, env=offset)


def _stop_by_exception(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def judge(record: RunRecord, snapshot: Snapshot, config: Path) -> Verdict:
    from domain.settings import parse_settings

    verdict = Verdict()
    check_answers(record, verdict)
    prices = Prices(parse_settings(config.read_text(), str(config)))
    ChargeChecks(record, snapshot, prices, verdict).run()
    replayed = replay(snapshot, verdict)
    check_sums(snapshot, replayed, record.teams, record.actions, verdict)
    check_budgets(snapshot, record.teams, verdict)
    dead = check_dead_holds(snapshot, record.attempts, record.faults, verdict)
    check_nothing_held(snapshot, replayed, dead, verdict)
    return verdict


def _save(
    folder: Path, plans: list[Plan], load: Load, injector: Injector, operator: Operator, snapshot: Snapshot
) -> None:
    (folder / "plans.jsonl").write_text("".join(json.dumps(asdict(p)) + "\n" for p in plans))
    (folder / "attempts.jsonl").write_text("".join(a.as_json() + "\n" for a in load.attempts))
    (folder / "events.jsonl").write_text(
        "".join(
            json.dumps(
                {"position": e.position, "team": e.team, "kind": e.kind, "version": e.version, "at": e.at, **e.fields},
                default=str,
            )
            + "\n"
            for e in snapshot.events
        )
    )
    (folder / "faults.json").write_text(
        json.dumps(
            {"faults": [asdict(f) for f in injector.faults], "operator": [asdict(a) for a in operator.actions]},
            indent=1,
        )
    )


def _report(verdict: Verdict, injector: Injector, gateways: list[GatewayProcess], seconds: float) -> None:
    for fault in injector.faults:
        say(
            f"fault at +{fault.started - injector.load.started:5.1f} s, {fault.ended - fault.started:4.1f} s: "
            f"{fault.kind}: {fault.detail}"
        )
    say("answers: " + ", ".join(f"{k} ×{v}" for k, v in sorted(verdict.statuses.items())))
    say("5xx by cause: " + (", ".join(f"{k} ×{v}" for k, v in sorted(verdict.causes.items())) or "none"))
    for note in verdict.notes:
        say(note)
    problems: Counter[str] = Counter()
    for gateway in gateways:
        problems.update(log_problems(gateway.log))
    for message, count in problems.most_common(12):
        say(f"gateway log: {count} × {message}")
    say(f"run took {seconds:.1f} s")
    for violation in verdict.violations:
        print(f"VIOLATION [{violation.check}] {violation.detail}", file=sys.stdout, flush=True)
