"""The gateway benchmark (issue #6): what Tollgate costs per request, against calling the upstream
directly and against the smallest honest proxy, in the same run.

For each ledger backend and worker count: start the bare proxy (the floor) and Tollgate on a fresh
ledger, both in front of one fast fake upstream; then for each case and concurrency, run the three
targets one after the other — direct, floor, Tollgate — and repeat that round (A B C A B C …), so
that whatever else the machine does hits all three alike. Each run is a closed loop of C
connections for ``duration`` seconds, driven from separate processes. Reported per point: the
medians over rounds of requests/s, latency p50/p99, what floor and Tollgate add over direct (p50,
p99, time to first chunk), CPU time per request of the server's processes (and of their main
threads, the event loops, alone), and Tollgate/floor; per configuration, peak RSS, what Tollgate's
loop spent a request, and a ``ledger verify`` that must find exactly one charge per answered
request. Then the issue's targets, each PASS or MISS.

    python -m scripts.bench [--backend sqlite|postgresql|both] [--workers 1,2] [--json out.json]
    tollgate bench …        (the same options)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

from scripts.bench import servers
from scripts.bench.cases import CASES, Case
from scripts.bench.loadgen import Load, LoadGenerators, Target, render_request
from scripts.bench.procstat import cpu_seconds, main_thread_cpu_seconds, peak_rss_mb
from scripts.bench.report import (
    check_targets,
    config_table,
    run_metrics,
    scaling_targets,
    summarise,
    targets_table,
)
from scripts.bench.soak import soak
from scripts.bench.stalls import StallFinder
from scripts.bench.stalls_render import render as render_stalls


class QuickOptions(TypedDict):
    """What ``--quick`` sets, in place of the options given."""

    duration: float
    rounds: int
    settle: float
    concurrency: list[int]
    warmup: float
    idle: float


QUICK: QuickOptions = {"duration": 0.2, "rounds": 1, "settle": 0.1, "concurrency": [1, 4], "warmup": 0.1, "idle": 0.5}


class Plan:
    """The options, with ``--quick`` applied."""

    def __init__(self, args: argparse.Namespace) -> None:
        quick = args.quick
        self.backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
        self.workers: list[int] = args.workers
        self.cases = [CASES[name] for name in args.cases]
        self.duration = QUICK["duration"] if quick else args.duration
        self.rounds = QUICK["rounds"] if quick else args.rounds
        self.settle = QUICK["settle"] if quick else args.settle
        default_concurrency = args.concurrency == [1, 16, 64]
        self.concurrency = QUICK["concurrency"] if quick and default_concurrency else args.concurrency
        self.warmup = QUICK["warmup"] if quick else min(1.0, self.duration)
        self.idle_seconds = QUICK["idle"] if quick else 4.0
        self.services = servers.Services(args.postgres_url, args.redis_url)
        self.args = args


@dataclass(frozen=True, slots=True)
class Rig:
    """What every configuration is measured with: the fast upstream, the load generators and the
    work folder (logs, ledgers, timelines)."""

    upstream: servers.Server
    loadgens: LoadGenerators
    workdir: Path


@dataclass(frozen=True, slots=True)
class Settling:
    """How far past its end a run's CPU is counted: ``seconds`` more, less what the server spends idle
    over them (``idle_cpu``, CPU seconds per second); and the stall finder its requests go to, if any.
    Tollgate's runs settle; the direct and floor runs do not."""

    seconds: float = 0.0
    idle_cpu: float = 0.0
    stalls: StallFinder | None = None


UNSETTLED = Settling()


def _sanity(server: servers.Server, case: Case, key: str, billed: bool) -> None:
    """One request before measuring: the target must answer it properly (Tollgate: with its cost)."""
    request = urllib.request.Request(
        server.url + case.path,
        data=case.body_bytes(),
        method="POST",
        headers={"content-type": "application/json", **case.headers(key)},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        body = answer.read()
    if b"usage" not in body or (billed and b'"cost"' not in body):
        raise RuntimeError(
            f"{server.name} answered {case.name} without {'its cost' if billed else 'usage'}: {body[:300]!r}"
        )


def measure(
    loadgens: LoadGenerators, server: servers.Server, load: Load, settling: Settling = UNSETTLED
) -> dict[str, Any]:
    """One closed-loop run. CPU is counted from just before the run until ``settling.seconds`` after
    it — work a server defers (Tollgate's audit history catches up every 2 s) belongs to the
    requests that caused it — less what the server spends idle over those settle seconds
    (``settling.idle_cpu``, CPU seconds per second: its timers), which no request caused."""
    pids = server.pids()
    before, loop_before = cpu_seconds(pids), main_thread_cpu_seconds(pids)
    result = loadgens.run(Target("127.0.0.1", server.port), load)
    loop_used = main_thread_cpu_seconds(pids) - loop_before  # during the run: deferred work is the threads'
    if settling.stalls is not None:
        settling.stalls.add(result)
    if settling.seconds:
        time.sleep(settling.seconds)
    used = cpu_seconds(pids) - before - settling.idle_cpu * settling.seconds
    metrics = run_metrics(
        result.ok, result.errors, result.seconds, list(result.latencies), list(result.first_chunk), max(used, 0.0)
    )
    metrics["loop_cpu_ms_per_request"] = loop_used * 1e3 / result.ok if result.ok else 0.0
    metrics["statuses"] = {str(k): v for k, v in result.statuses.items() if k != 200}  # what the errors were
    return metrics


def idle_cpu(server: servers.Server, seconds: float) -> float:
    """CPU seconds per second the server spends with no request at all, once it has settled after
    its start (Tollgate keeps working for a second or two after it first answers)."""
    time.sleep(min(3.0, seconds))
    pids = server.pids()
    before = cpu_seconds(pids)
    time.sleep(seconds)
    return (cpu_seconds(pids) - before) / seconds


def _rss(server: servers.Server) -> dict[str, Any]:
    peaks = peak_rss_mb(server.pids())
    workers = {pid: mb for pid, mb in peaks.items() if pid != server.pid} or peaks
    return {
        "max": max(workers.values()),
        "total": sum(peaks.values()),
        "processes": len(peaks),
        "by_process": {str(pid): round(mb, 1) for pid, mb in peaks.items()},
    }


def _requests(
    case: Case, targets: dict[str, servers.Server], key: str, keys: list[str] | None = None
) -> dict[str, bytes | list[bytes]]:
    """Each target's request; Tollgate's, given several teams' ``keys``, one per key (connection i uses key i mod N)."""

    def render(server: servers.Server, key: str) -> bytes:
        return render_request("127.0.0.1", server.port, case.path, case.body_bytes(), case.headers(key))

    return {
        name: ([render(server, k) for k in keys] if keys and len(keys) > 1 else render(server, key))
        if name == "tollgate"
        else render(server, "bench")
        for name, server in targets.items()
    }


def _profile(
    plan: Plan, targets: dict[str, servers.Server], key: str, loadgens: LoadGenerators, label: str
) -> tuple[dict[str, Any], int]:
    """py-spy on the floor and on Tollgate, each case at the highest concurrency (``--profile DIR``)."""
    from scripts.bench import profile

    outdir = Path(plan.args.profile)
    outdir.mkdir(parents=True, exist_ok=True)
    concurrency, seconds = max(plan.concurrency), plan.args.profile_seconds
    found: dict[str, Any] = {}
    served = 0
    for case in plan.cases:
        requests = _requests(case, targets, key)
        found[case.name] = {}
        for name in ("floor", "tollgate"):
            runs = []
            target, load = Target("127.0.0.1", targets[name].port), Load(requests[name], concurrency, seconds)
            drive = lambda: runs.append(loadgens.run(target, load))  # noqa: E731, B023
            found[case.name][name] = profile.record(
                targets[name].pid, seconds, outdir / f"{label}-{case.name}-{name}.txt", drive
            )
            served += runs[0].ok if name == "tollgate" else 0
        print(profile.render(f"{case.name}, c={concurrency}, {label}", found[case.name]), flush=True)
    return found, served


def bench_config(plan: Plan, configuration: servers.Configuration, rig: Rig, soak_seconds: float) -> dict[str, Any]:
    backend, workers = configuration.backend, configuration.workers
    upstream, loadgens, workdir = rig.upstream, rig.loadgens, rig.workdir
    print(f"\n== {backend}, --workers {workers} ==", flush=True)
    ledger = servers.new_ledger(workdir, upstream, configuration, plan.services, teams=plan.args.teams)
    floor = servers.bare_proxy(workdir, upstream, workers, plan.args.server)
    stalls = StallFinder(workdir / f"timeline-{backend}-w{workers}.jsonl") if plan.args.stalls else None
    gateway = servers.tollgate(workdir, ledger, workers, stalls.env() if stalls else None, plan.args.server)
    targets = {"direct": upstream, "floor": floor, "tollgate": gateway}
    answered = 0  # requests Tollgate answered with a 200: each must be exactly one charge in the ledger
    result: dict[str, Any] = {"backend": backend, "workers": workers, "teams": plan.args.teams, "cases": {}}
    try:
        floor.start()
        gateway.start()
        idle = result["tollgate_idle_cpu_ms_per_s"] = idle_cpu(gateway, plan.idle_seconds) * 1e3
        print(f"tollgate idle: {idle:.1f} ms CPU per second (subtracted over each run's settle time)", flush=True)
        settled = Settling(plan.settle, idle / 1e3, stalls)  # how Tollgate's runs are counted
        for case in plan.cases:
            result["cases"][case.name] = {}
            requests = _requests(case, targets, ledger.key, ledger.keys)
            for name, server in targets.items():  # one checked request, then a warm-up run
                _sanity(server, case, ledger.key, billed=name == "tollgate")
                warm = loadgens.run(
                    Target("127.0.0.1", server.port), Load(requests[name], max(plan.concurrency), plan.warmup)
                )
                if name == "tollgate":
                    answered += 1 + warm.ok
            for concurrency in plan.concurrency:
                rounds = []
                for _ in range(plan.rounds):
                    runs = {
                        name: measure(
                            loadgens,
                            server,
                            Load(requests[name], concurrency, plan.duration),
                            settled if name == "tollgate" else UNSETTLED,
                        )
                        for name, server in targets.items()
                    }
                    answered += runs["tollgate"]["requests"]
                    rounds.append(runs)
                point = summarise(rounds)
                result["cases"][case.name][str(concurrency)] = point
                t = point["tollgate"]
                print(
                    f"{case.name:<12} c={concurrency:<3} tollgate {t['rps']:>7,.0f} req/s, +{t['added_p50_ms']:.2f} ms "
                    f"p50, {t['cpu_ms_per_request']:.3f} ms CPU/req ({point['ratios']['cpu_ms_per_request'] or 0:.2f}× "
                    f"floor {point['floor']['cpu_ms_per_request']:.3f}); direct {point['direct']['rps']:,.0f} req/s",
                    flush=True,
                )
                if stalls is not None:
                    point["stalls"] = stalls.report(f"{case.name} c={concurrency}")
                    print(render_stalls(f"{case.name} c={concurrency}", point["stalls"]), flush=True)
        if plan.args.profile:
            result["profile"], served = _profile(plan, targets, ledger.key, loadgens, f"{backend}-w{workers}")
            answered += served
        result["peak_rss_mb"] = {"tollgate": _rss(gateway), "floor": _rss(floor)}
        if soak_seconds > 0:
            result["soak"] = soak(plan, gateway, ledger.key, loadgens, result, soak_seconds)
            answered += result["soak"]["requests"]
        gateway.stop()
        floor.stop()
        ok, charges, text = ledger.verify()
    finally:
        gateway.stop()
        floor.stop()
        ledger.drop()
    result["ledger"] = {
        "verified": ok,
        "charges": charges,
        "answered": answered,
        "summary": ("verify clean" if ok else "VERIFY FAILED")
        + (
            f", {charges} charges = {answered} answered requests"
            if charges == answered
            else f", {charges} charges but {answered} answered requests (MISMATCH)"
        ),
    }
    if not ok or charges != answered:
        print(f"ledger check failed: {result['ledger']['summary']}\n{text}", file=sys.stderr)
    return result


def _meta(plan: Plan) -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2]
    ).stdout.strip()
    program = "tollgate" if Path(sys.argv[0]).name == "tollgate" else "python -m scripts.bench"
    return {
        "command": " ".join([program, *sys.argv[1:]]),
        "teams": plan.args.teams,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit or None,
        "cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "python": platform.python_version(),
        "duration": plan.duration,
        "rounds": plan.rounds,
        "concurrency": plan.concurrency,
        "settle": plan.settle,
        "loadgen_processes": plan.args.loadgen_processes,
    }


def _upstream_row(configs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The fast upstream's own rate: direct chat at the highest concurrency, and its CPU per request."""
    points = [c["cases"]["chat"][max(c["cases"]["chat"], key=int)] for c in configs if "chat" in c["cases"]]
    if not points:
        return None
    direct = max(points, key=lambda p: p["direct"]["rps"])["direct"]
    cpu = direct["cpu_ms_per_request"]
    return {"rps": direct["rps"], "cpu_ms_per_request": cpu, "one_core_capacity_rps": 1000 / cpu if cpu else None}


def _stop_on_sigterm() -> None:
    """SIGTERM stops the benchmark like Ctrl-C: servers stopped, databases dropped."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def run(args: argparse.Namespace) -> int:
    _stop_on_sigterm()
    plan = Plan(args)
    report: dict[str, Any] = {"meta": _meta(plan), "configs": []}
    workdir = Path(tempfile.mkdtemp(prefix="tollgate-bench-"))
    loadgens = LoadGenerators(max(1, args.loadgen_processes))
    upstream = servers.fast_upstream(workdir).start()
    rig = Rig(upstream, loadgens, workdir)
    failed = True
    try:
        configs = [servers.Configuration(b, w) for b in plan.backends for w in plan.workers]
        for i, configuration in enumerate(configs):
            soak_seconds = args.soak if i == len(configs) - 1 else 0.0
            report["configs"].append(bench_config(plan, configuration, rig, soak_seconds))
        failed = False
    finally:
        upstream.stop()
        loadgens.close()
        if failed or args.keep:
            print(f"the servers' logs are in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    report["upstream_direct"] = _upstream_row(report["configs"])
    for config in report["configs"]:
        config["targets"] = check_targets(config, config.get("soak"))
    report["scaling"] = scaling_targets(report["configs"])
    report["meta"]["load_average_at_end"] = os.getloadavg()
    print(render(report, plan))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
        print(f"\nJSON: {args.json}")
    return (
        0
        if all(c["ledger"]["verified"] and c["ledger"]["charges"] == c["ledger"]["answered"] for c in report["configs"])
        else 1
    )


def render(report: dict[str, Any], plan: Plan) -> str:
    meta = report["meta"]
    streams = {case.name: case.stream for case in plan.cases}
    out = [
        (
            f"\n# Tollgate benchmark — {meta['date']}, commit {meta['commit']}, {meta['cpus']} CPUs, "
            f"load average {meta['load_average_at_start'][0]:.2f} at start, {meta['load_average_at_end'][0]:.2f} at end"
        ),
        (
            f"`{meta['command']}`: {meta['rounds']} interleaved rounds of {meta['duration']} s per point, medians; "
            "latencies in ms; 'added' = target − direct in the same round; CPU = the server's processes."
        ),
    ]
    up = report["upstream_direct"]
    if up:
        out.append(
            f"\nUpstream direct (the fast fake upstream, one process): {up['rps']:,.0f} req/s measured, "
            f"{up['cpu_ms_per_request'] * 1000:.1f} µs CPU per request "
            f"(≈ {up['one_core_capacity_rps'] or 0:,.0f} req/s on one core)."
        )
    for config in report["configs"]:
        out += ["", config_table(config, streams), "", targets_table(config["targets"])]
        if "soak" in config:
            s = config["soak"]
            out.append(
                f"\nSoak: {s['seconds']:.0f} s at {s['rate']:.0f} req/s (half the peak), "
                f"{s['achieved_rps']:.0f} req/s achieved; RSS {s['rss_start_mb']:.1f} → {s['rss_end_mb']:.1f} MB "
                f"per process at most ({s['growth_pct']:+.1f} %)."
            )
    if report.get("scaling"):
        out += ["", "Two workers against one (chat, c=64):", "", targets_table(report["scaling"])]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from scripts.bench.options import add_bench_arguments

    parser = argparse.ArgumentParser(
        prog="tollgate bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_bench_arguments(parser)
    return run(parser.parse_args(argv))
