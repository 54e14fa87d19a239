"""From runs to numbers: medians over interleaved rounds, what Tollgate adds over the direct call
and over the floor, the issue's targets checked one by one, and the tables.

"Added" latency is always taken within one round (target minus direct, measured a few seconds
apart) and only then is the median taken, so slow drift of a noisy machine cancels out.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

TARGETS = ("direct", "floor", "tollgate")


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def run_metrics(
    ok: int, errors: int, seconds: float, latencies: list[float], first_chunk: list[float], cpu_seconds: float
) -> dict[str, Any]:
    lat, ttfc = sorted(latencies), sorted(first_chunk)
    return {
        "requests": ok,
        "errors": errors,
        "rps": ok / seconds,
        "p50_ms": percentile(lat, 0.5) * 1e3,
        "p99_ms": percentile(lat, 0.99) * 1e3,
        "ttfc_p50_ms": percentile(ttfc, 0.5) * 1e3,
        "ttfc_p99_ms": percentile(ttfc, 0.99) * 1e3,
        "cpu_ms_per_request": cpu_seconds * 1e3 / ok if ok else 0.0,
    }


def _median(rounds: list[dict[str, Any]], target: str, key: str) -> float:
    return float(statistics.median(r[target][key] for r in rounds))


def summarise(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """One case at one concurrency: each target's medians, what floor and Tollgate add over direct,
    and Tollgate/floor."""
    point: dict[str, Any] = {"rounds": rounds}
    for target in TARGETS:
        point[target] = {
            key: _median(rounds, target, key)
            for key in ("rps", "p50_ms", "p99_ms", "ttfc_p50_ms", "ttfc_p99_ms", "cpu_ms_per_request")
        }
        # The main threads' (the event loops') share of it, during the run itself.
        point[target]["loop_cpu_ms_per_request"] = _median(rounds, target, "loop_cpu_ms_per_request")
        point[target]["requests"] = sum(r[target]["requests"] for r in rounds)
        point[target]["errors"] = sum(r[target]["errors"] for r in rounds)
        statuses: dict[str, int] = {}
        for r in rounds:
            for status, n in r[target].get("statuses", {}).items():
                statuses[status] = statuses.get(status, 0) + n
        point[target]["error_statuses"] = statuses  # the rest of the errors: connections lost
    for target in ("floor", "tollgate"):
        for key in ("p50_ms", "p99_ms", "ttfc_p50_ms"):
            point[target]["added_" + key] = statistics.median(r[target][key] - r["direct"][key] for r in rounds)
    point["ratios"] = {
        key: _ratio(point["tollgate"][key], point["floor"][key])
        for key in ("rps", "cpu_ms_per_request", "p50_ms", "added_p50_ms", "added_p99_ms", "added_ttfc_p50_ms")
    }
    return point


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def _errors(m: dict[str, Any]) -> str:
    """``12 errors: 503×10, 2 lost`` — statuses other than 200, and connections that broke."""
    statuses = m.get("error_statuses", {})
    lost = m["errors"] - sum(statuses.values())
    parts = [f"{status}×{n}" for status, n in sorted(statuses.items())] + ([f"{lost} lost"] if lost else [])
    return f"{m['errors']} errors: {', '.join(parts)}"


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _rps(value: float) -> str:
    return f"{value:,.0f}"


def point_rows(case: str, stream: bool, concurrency: int, point: dict[str, Any]) -> list[str]:
    rows = []
    for target in TARGETS:
        m = point[target]
        added = target != "direct"
        rows.append(
            " | ".join(
                [
                    case,
                    str(concurrency),
                    target,
                    _rps(m["rps"]),
                    _fmt(m["p50_ms"]),
                    _fmt(m["p99_ms"]),
                    _fmt(m["added_p50_ms"]) if added else "",
                    _fmt(m["added_p99_ms"]) if added else "",
                    _fmt(m["ttfc_p50_ms"]) if stream else "",
                    _fmt(m["added_ttfc_p50_ms"]) if stream and added else "",
                    _fmt(m["cpu_ms_per_request"], 3) + (f" ({_errors(m)})" if m["errors"] else ""),
                ]
            )
        )
    r = point["ratios"]
    rows.append(
        " | ".join(
            [
                case,
                str(concurrency),
                "**tollgate/floor**",
                _fmt(r["rps"]) + "×",
                "",
                "",
                _fmt(r["added_p50_ms"]) + "×",
                _fmt(r["added_p99_ms"]) + "×",
                "",
                _fmt(r["added_ttfc_p50_ms"]) + "×" if stream else "",
                _fmt(r["cpu_ms_per_request"]) + "×",
            ]
        )
    )
    return ["| " + row + " |" for row in rows]


HEADER = [
    (
        "| case | c | target | req/s | p50 ms | p99 ms | added p50 | added p99 | 1st chunk p50 | added 1st chunk "
        "| CPU ms/req |"
    ),
    "|---|---|---|---|---|---|---|---|---|---|---|",
]


def config_table(config: dict[str, Any], streams: dict[str, bool]) -> str:
    lines = [f"### {config['backend']}, --workers {config['workers']}", "", *HEADER]
    for case, by_concurrency in config["cases"].items():
        for concurrency, point in by_concurrency.items():
            lines += point_rows(case, streams[case], int(concurrency), point)
    rss = config["peak_rss_mb"]
    lines += [
        "",
        (
            f"Peak RSS (VmHWM): tollgate {rss['tollgate']['max']:.0f} MB per process at most "
            f"({rss['tollgate']['processes']} processes, {rss['tollgate']['total']:.0f} MB in all); "
            f"bare proxy {rss['floor']['max']:.0f} MB per process "
            f"({rss['floor']['processes']} processes, {rss['floor']['total']:.0f} MB in all). "
            f"Tollgate idle: {config['tollgate_idle_cpu_ms_per_s']:.1f} ms CPU per second. "
            f"Ledger: {config['ledger']['summary']}."
        ),
        "",
        _loop_line(config),
    ]
    return "\n".join(lines)


def _loop_line(config: dict[str, Any]) -> str:
    """What Tollgate's event loops (each process's main thread) spent a request during the runs, at
    each case's highest concurrency, and the rate a loop at one full core would then serve at most:
    the bound that taking the other threads' work out of the process cannot lift."""
    parts = []
    for case, by_concurrency in config["cases"].items():
        concurrency = max(by_concurrency, key=int)
        t = by_concurrency[concurrency]["tollgate"]
        loop, whole = t.get("loop_cpu_ms_per_request", 0.0), t["cpu_ms_per_request"]
        if loop > 0 and whole > 0:
            loops = max(1, config["workers"])
            cores = "one loop at a full core" if loops == 1 else f"{loops} loops at a full core each"
            parts.append(
                f"{case} c={concurrency} {loop:.3f} ms ({loop / whole:.0%} of its CPU; at most "
                f"{loops * 1000 / loop:,.0f} req/s with {cores})"
            )
    measured = "; ".join(parts) or "not measured"
    return f"Tollgate's event loop (the main thread) per request, during the runs: {measured}."


def _check(name: str, limit: str, measured: float | None, ok: bool | None, unit: str, note: str = "") -> dict[str, Any]:
    return {
        "target": name,
        "limit": limit,
        "measured": measured,
        "unit": unit,
        "verdict": "n/a" if ok is None else ("PASS" if ok else "MISS"),
        "note": note,
    }


#: Issue #17's limits: CPU per request of non-streaming chat at c=64, by ledger backend.
CPU_LIMIT_MS = {"sqlite": 0.45, "postgresql": 0.55}
#: Added p50 latency of non-streaming chat at c=1, by backend.
ADDED_P50_LIMIT_MS = {"sqlite": 1.0, "postgresql": 1.5}


def check_targets(config: dict[str, Any], soak: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Issue #17's targets, for one configuration (each needs its case and concurrency to have run)."""
    checks = []
    backend, workers = config["backend"], config["workers"]
    chat = config["cases"].get("chat", {})
    stream = config["cases"].get("chat_stream", {})
    if "64" in chat:
        point = chat["64"]
        t = point["tollgate"]
        checks.append(_tail("chat, c=64", t))
        cpu, ratio = t["cpu_ms_per_request"], point["ratios"]["cpu_ms_per_request"]
        checks.append(
            _check("CPU/request, chat, c=64", f"≤ {CPU_LIMIT_MS[backend]} ms", cpu, cpu <= CPU_LIMIT_MS[backend], "ms")
        )
        checks.append(
            _check("CPU/request, chat, c=64", "≤ 2.5 × floor", ratio, ratio is not None and ratio <= 2.5, "×")
        )
        rps, teams = t["rps"], config.get("teams", 1)
        if workers == 1:
            checks.append(
                _check(
                    "requests/s, chat, c=64, one worker",
                    "≥ 1,800",
                    rps,
                    rps >= 1800 if backend == "sqlite" else None,
                    "req/s",
                    "" if backend == "sqlite" else "the target is for SQLite",
                )
            )
        else:
            applies = backend == "postgresql" and workers == 2 and teams > 1
            checks.append(
                _check(
                    f"requests/s, chat, c=64, {workers} workers, {teams} team(s)",
                    "≥ 2,500",
                    rps,
                    rps >= 2500 if applies else None,
                    "req/s",
                    "" if applies else "the target is for 2 workers on PostgreSQL across many teams",
                )
            )
    if "1" in chat:
        t = chat["1"]["tollgate"]
        limit = ADDED_P50_LIMIT_MS[backend]
        checks.append(
            _check("added latency p50, chat, c=1", f"≤ {limit} ms", t["added_p50_ms"], t["added_p50_ms"] <= limit, "ms")
        )
        checks.append(
            _check("added latency p99, chat, c=1", "≤ 2.5 ms", t["added_p99_ms"], t["added_p99_ms"] <= 2.5, "ms")
        )
    if "64" in stream:
        t = stream["64"]["tollgate"]
        checks.append(_tail("stream, c=64", t))
        if "64" in chat:
            ratio = _ratio(t["cpu_ms_per_request"], chat["64"]["tollgate"]["cpu_ms_per_request"])
            checks.append(
                _check(
                    "CPU/request, 20-chunk stream vs chat, c=64",
                    "≤ 1.3 ×",
                    ratio,
                    ratio is not None and ratio <= 1.3,
                    "×",
                )
            )
        added = t["added_ttfc_p50_ms"]
        checks.append(_check("added time to first chunk p50, stream, c=64", "≤ 5 ms", added, added <= 5.0, "ms"))
    rss = config["peak_rss_mb"]["tollgate"]["max"]
    checks.append(_check("peak RSS per worker", "≤ 150 MB", rss, rss <= 150, "MB"))
    if soak is not None:
        growth = soak["growth_pct"]
        short = "" if soak["seconds"] >= 600 else "shorter than the target's 10 minutes"
        checks.append(
            _check(
                f"RSS growth, {soak['seconds']:.0f} s soak at {soak['rate']:.0f} req/s",
                "< 5 % (flat)",
                growth,
                growth < 5,
                "%",
                short,
            )
        )
        end = soak["rss_end_mb"]
        checks.append(_check("RSS at the end of the soak, per worker", "≤ 150 MB", end, end <= 150, "MB"))
    return checks


def _tail(name: str, tollgate: dict[str, Any]) -> dict[str, Any]:
    """p99 against p50 of Tollgate's own latency: a stall shows here first."""
    ratio = _ratio(tollgate["p99_ms"], tollgate["p50_ms"])
    return _check(f"p99 / p50, {name}", "≤ 3 ×", ratio, ratio is not None and ratio <= 3.0, "×")


def scaling_targets(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two workers against one on the same backend and teams (chat, c=64): ≥ 1.6 × across many
    teams; on one team, no worse than one worker."""
    checks = []
    by = {(c["backend"], c.get("teams", 1), c["workers"]): c for c in configs}
    for (backend, teams, workers), config in sorted(by.items()):
        one = by.get((backend, teams, 1))
        if (
            workers != 2
            or one is None
            or "64" not in config["cases"].get("chat", {})
            or "64" not in one["cases"].get("chat", {})
        ):
            continue
        ratio = _ratio(config["cases"]["chat"]["64"]["tollgate"]["rps"], one["cases"]["chat"]["64"]["tollgate"]["rps"])
        if teams > 1:
            checks.append(
                _check(
                    f"2 workers / 1, {backend}, {teams} teams",
                    "≥ 1.6 ×",
                    ratio,
                    ratio is not None and ratio >= 1.6,
                    "×",
                )
            )
        else:
            checks.append(
                _check(
                    f"2 workers / 1, {backend}, one team",
                    "≥ 1.0 × (no worse)",
                    ratio,
                    ratio is not None and ratio >= 0.95,
                    "×",
                    "within 5 %: the runs' noise",
                )
            )
    return checks


def targets_table(checks: list[dict[str, Any]]) -> str:
    lines = ["| target | limit | measured | verdict |", "|---|---|---|---|"]
    for c in checks:
        measured = "–" if c["measured"] is None else f"{c['measured']:,.2f} {c['unit']}"
        verdict = c["verdict"] + (f" ({c['note']})" if c["note"] else "")
        lines.append(f"| {c['target']} | {c['limit']} | {measured} | {verdict} |")
    return "\n".join(lines)
