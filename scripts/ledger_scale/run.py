"""The ledger at scale (issue #16): one team with a long history (default 1,000,000 events) beside a
few small ones, on SQLite and PostgreSQL, and what that history costs.

For each backend: build the ledger fast (``build.py``) or reuse the one ``--keep DIR`` kept; then
  1. cold load: ``LedgerStore.load_team`` of the big team in a fresh process — time, and growth of
     its resident set — as it is, at its worst (just before its latest snapshot), and as a full
     replay, snapshots ignored (the baseline);
  2. first request after a restart: ``tollgate serve`` started afresh (in front of the fast fake
     upstream), the big team's first chat completion as the process's first request; restart, a
     100-event team's first (the process's own first-request costs), then the 1,000-event team's
     and the big team's. Before each restart a small team's requests are appended (``bury``), so
     the gateway does not warm the big team at start: its first request loads it;
  3. restart, one request of a third team, then the big team's first request and, at the same
     moment, the 1,000-event team's requests: what that team's first waited beyond its first
     alone; again with the big team's snapshots moved away (its load is then a full replay);
  4. steady p50/p99 of the big team and of the 1,000-event team, requests alternating;
  5. the audit history set 500,000 events back, restart: the small team's p50 while the projector
     catches up, against its p50 right after;
  6. ``tollgate ledger verify``, ``rebuild`` and ``export --team big`` (and of the 1,000-event
     team, to tell constant memory): times, rates, peak RSS.
Then the issue's targets beside the figures, PASS or MISS, as one Markdown table. First-request
figures are medians over ``--repeat`` restarts. A run is minutes on top of the build (1M events:
about one on SQLite, three on PostgreSQL); ``--keep DIR`` keeps the ledger for the next run.

    python -m scripts.ledger_scale [--events 1000000] [--backend sqlite|postgresql|both] [--keep DIR]
                                   [--skip-full-replay] [--repeat 3] [--json FILE] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.store.snapshots import SNAPSHOT_EVERY
from scripts.bench import servers
from scripts.bench.options import DEFAULT_POSTGRES
from scripts.ledger_scale import gateway, ledger, setback
from scripts.ledger_scale.build import build, bury, top_up
from scripts.ledger_scale.coldload import cold_load
from scripts.ledger_scale.report import check_targets, table
from scripts.ledger_scale.tools import export, operator_tools

#: The quick run's sizes: large enough for a dozen snapshots and a backlog the catch-up is measured
#: on, small enough for the suite (tests/e2e/scripts/test_ledger_scale.py runs it once per backend).
QUICK_EVENTS = 6_000
QUICK_BACKLOG = 3_000
#: From this backlog up, a third team's request takes the process's first-request costs before the
#: catch-up is measured; a smaller one might be caught up by then (the quick run's).
WARM_BEFORE_CATCH_UP = 100_000


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Plan:
    """The options, with ``--quick`` applied."""

    def __init__(self, args: argparse.Namespace) -> None:
        quick = args.quick
        self.backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
        self.events: int = QUICK_EVENTS if quick and args.events is None else (args.events or 1_000_000)
        self.snapshot_every: int = args.snapshot_every
        self.requests = 30 if quick else args.requests
        self.warmup = 5 if quick else 50
        self.cold_runs = 1 if quick else 3
        self.repeat: int = 1 if quick else args.repeat
        self.backlog: int = args.backlog or (QUICK_BACKLOG if quick else 500_000)
        self.full_replay = not args.skip_full_replay
        self.keep: Path | None = args.keep
        self.postgres_admin: str = args.postgres_url
        self.args = args


def prepared(plan: Plan, backend: str, workdir: Path) -> ledger.Ledger:
    """The backend's ledger: the one kept in ``--keep DIR`` if it was built with as many events,
    else a new one, built now."""
    found = ledger.kept(workdir, backend) if plan.keep else None
    if found is not None and found.built_events == plan.events:
        say(f"reusing the {backend} ledger kept in {workdir} ({found.build.get('events', 0):,} events at its build)")
        setback.snapshots_back(found)  # a run stopped with them set aside
        return found
    if found is not None:
        say(
            f"the kept {backend} ledger has {found.built_events:,} events in its big team, not {plan.events:,}: "
            "building a new one"
        )
        found.drop()
    fresh = ledger.new_ledger(workdir, backend, plan.postgres_admin)
    fresh.save()  # names the PostgreSQL database before anything can fail
    say(f"building the {backend} ledger: a team with {plan.events:,} events and {len(ledger.SMALL)} small teams…")
    figures = build(fresh, plan.events, plan.snapshot_every)
    say(
        f"  built {figures['events']:,} events in {figures['seconds']} s ({figures['events_per_s']:,} events/s; "
        f"the big team written at {figures['big_team_write_events_per_s']:,} events/s, the audit history "
        f"projected at {figures['history_events_per_s']:,} events/s), {figures['snapshots']:,} snapshots"
    )
    return fresh


def _mb(value: float | None) -> str:
    return "unknown (the kernel would not reset the peak)" if value is None else f"{value:.1f} MB"


def _cold_load(plan: Plan, built: ledger.Ledger, version: int | None) -> dict[str, Any]:
    big = built.teams[ledger.BIG].id
    runs = [cold_load(built.database_url, built.workdir, big, version=version) for _ in range(plan.cold_runs)]
    return {
        "ms": statistics.median(r["ms"] for r in runs),
        "peak_growth_mb": max((r["peak_growth_mb"] for r in runs if r["peak_growth_mb"] is not None), default=None),
        "rss_growth_mb": max(r["rss_growth_mb"] for r in runs),
        "version": runs[0]["version"],
        "snapshot_version": runs[0]["snapshot_version"],
        "replayed_events": runs[0]["version"] - runs[0]["snapshot_version"],
        "runs": runs,
    }


def _cold_loads(plan: Plan, built: ledger.Ledger) -> dict[str, Any]:
    """The big team loaded as it is now — from its latest snapshot plus however many events came
    after it — and at the version just before its latest snapshot, the most a load replays."""
    result = {"snapshot": _cold_load(plan, built, None)}
    latest = setback.snapshot_versions(built, built.teams[ledger.BIG].id)
    if len(latest) == 2:
        result["worst_case"] = _cold_load(plan, built, latest[0] - 1)
    for case, cold in result.items():
        say(
            f"  cold load ({case.replace('_', ' ')}): {cold['ms']:.1f} ms (median of {plan.cold_runs}), peak RSS "
            f"growth {_mb(cold['peak_growth_mb'])}, from the snapshot at version {cold['snapshot_version']:,} "
            f"and {cold['replayed_events']:,} events after it"
        )
    if plan.full_replay:
        replay = result["full_replay"] = cold_load(
            built.database_url, built.workdir, built.teams[ledger.BIG].id, full_replay=True
        )
        say(f"  full replay: {replay['ms']:,.0f} ms, peak RSS growth {_mb(replay['peak_growth_mb'])}")
    return result


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each number over runs of the same measurement, and the runs."""
    numbers = [k for k, v in runs[0].items() if isinstance(v, int | float)]
    return {**{k: statistics.median(run[k] for run in runs) for k in numbers}, "runs": runs}


def _first_requests(plan: Plan, built: ledger.Ledger, gw: gateway.Gateway) -> dict[str, Any]:
    """The big team's first request as the restarted process's first (then, once, the steady
    figures); then, on another restart, a 100-event team's first (the process's own first-request
    costs), the 1,000-event team's (alone) and the big team's (the ledger's share). The big team is
    never warmed at start (``bury``). Medians over ``--repeat`` pairs of restarts."""
    big, small, other = (built.teams[n] for n in (ledger.BIG, ledger.BASELINE, ledger.FILLER))
    runs, steady = [], {}
    for i in range(plan.repeat):
        bury(built, ledger.FILLER, plan.snapshot_every)
        with gw.restarted() as server:
            run: dict[str, Any] = {"gateway_ready_s": gw.ready_s, "big_ms": gateway.first_request(server, big)}
            run["gateway_rss_mb"] = gateway.rss(server)
            if i == 0:
                steady = gateway.steady(server, [big, small], plan.requests, plan.warmup)
        bury(built, ledger.FILLER, plan.snapshot_every)
        with gw.restarted() as server:
            run["process_first_ms"] = gateway.first_request(server, other)
            run["small_first_ms"] = gateway.first_request(server, small)
            run["big_warm_process_ms"] = gateway.first_request(server, big)
        runs.append(run)
    first = _medians(runs)
    say(
        f"  first request after a restart: big team {first['big_ms']:.1f} ms (the gateway answered "
        f"{first['gateway_ready_s']:.1f} s after its start); a 100-event team's {first['process_first_ms']:.1f} ms; "
        f"then the 1,000-event team's {first['small_first_ms']:.1f} ms and the big team's "
        f"{first['big_warm_process_ms']:.1f} ms (medians of {plan.repeat})"
    )
    steady["big"]["snapshots"] = setback.snapshot_count(built, big.id)
    say(
        f"  steady p50: big team {steady['big']['p50_ms']:.2f} ms, "
        f"1,000-event team {steady['baseline']['p50_ms']:.2f} ms"
    )
    return {"first_request": first, "steady": steady}


def _alongside(plan: Plan, built: ledger.Ledger, gw: gateway.Gateway, full_replay: bool) -> dict[str, Any]:
    """Restart, one request of a third team (the process's first-request costs, out of the way),
    then the big team's first request and the 1,000-event team's at the same moment. With snapshots
    (a load of milliseconds), medians over ``--repeat`` restarts; without (a full replay), once."""
    big, small, other = (built.teams[n] for n in (ledger.BIG, ledger.BASELINE, ledger.FILLER))
    moved = setback.snapshots_aside(built, big.id) if full_replay else 0
    runs = []
    try:
        for _ in range(1 if full_replay else plan.repeat):
            bury(built, ledger.FILLER, plan.snapshot_every)
            with gw.restarted() as server:
                gateway.first_request(server, other)
                runs.append(gateway.alongside(server, big, small))
    finally:
        if full_replay:
            setback.snapshots_back(built)
    result = {**_medians(runs), "small": runs[0]["small"]} if full_replay else _medians(runs)
    result["snapshots_moved_aside"] = moved
    say(
        f"  alongside the big team's {'full replay' if full_replay else 'load'}: its first request "
        f"{result['big_first_ms']:,.1f} ms, the 1,000-event team's first {result['small_first_ms']:.1f} ms"
        + (
            f", p50 {runs[0]['small']['p50_ms']:.1f} ms over {runs[0]['small']['requests']} requests, slowest "
            f"{runs[0]['small']['max_ms']:.1f} ms"
            if full_replay
            else f" (medians of {len(runs)})"
        )
    )
    return result


def _requests(plan: Plan, built: ledger.Ledger, workdir: Path) -> dict[str, Any]:
    small = built.teams[ledger.BASELINE]
    gw = gateway.Gateway(built, workdir)
    result = _first_requests(plan, built, gw)
    result["alongside"] = {"snapshots": _alongside(plan, built, gw, full_replay=False)}
    if plan.full_replay:
        result["alongside"]["full_replay"] = _alongside(plan, built, gw, full_replay=True)
    position, target = setback.set_history_back(built, plan.backlog)
    polled = setback.Position(built)
    try:
        with gw.restarted() as server:
            if target - position >= WARM_BEFORE_CATCH_UP:  # the process's first-request costs, out of the way
                gateway.first_request(server, built.teams[ledger.FILLER])
            catch_up = gateway.during_catch_up(
                server, small, gateway.CatchUp(polled, target, gw.started_at), plan.requests
            )
    finally:
        polled.close()
    catch_up["backlog_events"] = target - position
    catch_up["events_per_s"] = (target - position) / catch_up["caught_up_s"]
    result["catch_up"] = catch_up
    say(
        f"  {target - position:,}-event projection backlog caught up {catch_up['caught_up_s']:.1f} s after the "
        f"gateway's start; the 1,000-event team's p50 meanwhile {catch_up['during']['p50_ms'] or 0:.2f} ms over "
        f"{catch_up['during']['requests']} requests, {catch_up['after']['p50_ms']:.2f} ms after"
    )
    return result


def bench_backend(plan: Plan, backend: str, workdir: Path, upstream: servers.Server) -> dict[str, Any]:
    say(f"\n== {backend} ==")
    built = prepared(plan, backend, workdir)
    built.write_config(upstream.url, plan.snapshot_every)
    top_up(built)
    try:
        result: dict[str, Any] = {
            "backend": backend,
            "ledger": {
                "big_team_events": built.build.get("big_team_events"),
                "events_at_build": built.build.get("events"),
                "build_seconds": built.build.get("seconds"),
                "build_events_per_s": built.build.get("events_per_s"),
                "build": built.build,
            },
        }
        result["cold_load"] = _cold_loads(plan, built)
        result.update(_requests(plan, built, workdir))
        say("  ledger verify, rebuild, export…")
        tools = result["tools"] = operator_tools(built, workdir, ledger.BIG)
        tools["export_small"] = export(built, workdir, ledger.BASELINE)
        say(
            f"  verify {tools['verify']['seconds']:.1f} s, rebuild {tools['rebuild']['events_per_s']:,.0f} events/s, "
            f"export {tools['export']['rows']:,} rows at {tools['export']['rows_per_s']:,.0f} rows/s "
            f"(peak RSS {tools['export']['peak_rss_mb']:.0f} MB; {tools['export_small']['peak_rss_mb']:.0f} MB for "
            f"the 1,000-event team)"
        )
    finally:
        if plan.keep is None:
            built.drop()
    result["targets"] = check_targets(result)
    return result


def _meta(plan: Plan) -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2]
    ).stdout.strip()
    return {
        "command": " ".join(["python -m scripts.ledger_scale", *sys.argv[1:]]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit or None,
        "cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "python": platform.python_version(),
        "events": plan.events,
        "snapshot_every": plan.snapshot_every,
        "requests": plan.requests,
        "backlog": plan.backlog,
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scripts.ledger_scale",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--events", type=int, help="events in the big team's history (default 1,000,000)")
    p.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    p.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="build the ledger in DIR and keep it (and its PostgreSQL database); reuse it next time",
    )
    p.add_argument(
        "--skip-full-replay",
        action="store_true",
        help="skip what loads the big team without its snapshots (a full replay, minutes at 1M events)",
    )
    p.add_argument("--requests", type=int, default=400, help="sequential requests per team for the steady figures")
    p.add_argument(
        "--repeat", type=int, default=3, help="restarts per first-request figure, their median reported (default 3)"
    )
    p.add_argument("--backlog", type=int, help="events the audit history is set back (default 500,000)")
    p.add_argument(
        "--snapshot-every",
        type=int,
        default=SNAPSHOT_EVERY,
        help=f"the gateway's snapshot_every, used by the build too (default {SNAPSHOT_EVERY})",
    )
    p.add_argument(
        "--postgres-url",
        default=DEFAULT_POSTGRES,
        help="a PostgreSQL server where the benchmark may create (and drop) a database",
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="also write every figure as JSON to FILE")
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"a {QUICK_EVENTS:,}-event team and few requests, to check the benchmark works",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # servers stopped, databases dropped, as on Ctrl-C
    plan = Plan(parser().parse_args(argv))
    report: dict[str, Any] = {"meta": _meta(plan), "backends": {}}
    workdir = plan.keep or Path(tempfile.mkdtemp(prefix="tollgate-ledger-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    upstream = servers.fast_upstream(workdir).start()
    failed = True
    try:
        for backend in plan.backends:
            report["backends"][backend] = bench_backend(plan, backend, workdir, upstream)
        failed = False
    finally:
        upstream.stop()
        if failed and plan.keep is None:
            say(f"the logs are in {workdir}")
        elif plan.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    report["meta"]["load_average_at_end"] = os.getloadavg()
    meta = report["meta"]
    print(
        f"\n# Ledger at scale — {meta['date']}, commit {meta['commit']}, {meta['cpus']} CPUs, load average "
        f"{meta['load_average_at_start'][0]:.2f} at start, {meta['load_average_at_end'][0]:.2f} at end\n"
    )
    print(table(report["backends"]))
    if plan.args.json:
        plan.args.json.write_text(json.dumps(report, indent=1))
        print(f"\nJSON: {plan.args.json}")
    return 0
