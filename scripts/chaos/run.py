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
from scripts.chaos.faults import KILL, Injector, schedule_for
from scripts.chaos.gateways import FakeUpstreamProcess, GatewayProcess, run_cli, write_config
from scripts.chaos.invariants import DEAD_RELEASE_SECONDS, check_dead_holds, check_nothing_held, check_sums, replay
from scripts.chaos.ledger import Snapshot, read_snapshot, wait_until_nothing_held
from scripts.chaos.load import Load
from scripts.chaos.logs import log_problems
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


def run(seed: int | None, long: bool, keep: bool, faults: bool = True) -> int:
    profile = LONG if long else CI
    seed = seed if seed is not None else (random.randrange(1, 1_000_000) if long else CI_SEED)
    print(
        f"chaos: {profile.name} mode, seed {seed} (again: python -m scripts.chaos --seed {seed}"
        f"{' --long' if long else ''}{'' if faults else ' --no-faults'})",
        flush=True,
    )
    folder = Path(tempfile.mkdtemp(prefix="tollgate-chaos-"))
    folder.chmod(0o755)  # the postgres user reaches its cluster inside
    signal.signal(signal.SIGTERM, _stop_by_exception)
    started = time.monotonic()
    postgres, redis, upstream = PostgresCluster(folder / "postgres"), RedisServer(folder), FakeUpstreamProcess(folder)
    gateways: list[GatewayProcess] = []
    failed = True
    try:
        postgres.init().start()
        database_url = postgres.create_database(DATABASE)
        redis.start()
        upstream.start()
        config = write_config(folder, database_url, redis.url, upstream.url)
        teams = open_teams(database_url, folder, profile.teams, profile.poor_every)
        gateways = [GatewayProcess(i, config) for i in range(GATEWAYS)]
        for gateway in gateways:
            gateway.launch()
        for gateway in gateways:
            gateway.wait_ready()
        say(
            f"ready in {time.monotonic() - started:.1f} s: PostgreSQL :{postgres.port}, Redis :{redis.port}, "
            f"upstream :{upstream.port}, gateways {', '.join(f':{g.port}' for g in gateways)}; "
            f"{len(teams)} teams ({sum(t.poor for t in teams)} poor); work folder {folder}"
        )

        plans = plan_traffic(seed, profile.requests, len(teams), GATEWAYS, profile.duration)
        load = Load(
            plans,
            lambda g: gateways[g].url,
            lambda g: gateways[g].pid,
            [t.secrets for t in teams],
            GATEWAYS,
            profile.concurrency,
        )
        operator = Operator(config)
        injector = Injector(postgres, DATABASE, redis, gateways, operator, teams, load, random.Random(seed))
        schedule = schedule_for(long) if faults else []

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
        if failed or keep:
            print(f"chaos: kept {folder} (gateway logs, attempts.jsonl, events.jsonl, faults.json)", flush=True)
        else:
            shutil.rmtree(folder, ignore_errors=True)


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
