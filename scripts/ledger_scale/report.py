"""From one backend's measurements to the issue's targets (each PASS or MISS), and the table: one
row per figure, a column per backend, ready to paste into docs/performance.md.

Runs made separately (one backend each) are put in one table by
``python -m scripts.ledger_scale.report RUN.json [RUN.json …]`` (the files ``--json`` wrote).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Within how many MB of exporting the small team's few rows the big team's export must stay to
#: count as constant memory.
EXPORT_RSS_SLACK_MB = 20.0


@dataclass(frozen=True)
class Row:
    """One line of the table: what is measured, the issue's target (None: for information), how to
    read it from a backend's result, how to show it, and whether it meets the target."""

    label: str
    target: str | None
    value: Callable[[dict[str, Any]], float | None]
    shown: Callable[[float], str]
    meets: Callable[[float], bool] | None = None


def _ms(value: float) -> str:
    return f"{value:,.1f} ms"


def _mb(value: float) -> str:
    return f"{value:,.1f} MB"


def _s(value: float) -> str:
    return f"{value:,.1f} s"


def _per_s(value: float) -> str:
    return f"{value:,.0f}/s"


def _pct(value: float) -> str:
    return f"{value:+.1f} %"


def _plus_ms(value: float) -> str:
    return f"{value:+,.1f} ms"


def _get(*path: str) -> Callable[[dict[str, Any]], float | None]:
    def read(result: dict[str, Any]) -> float | None:
        value: Any = result
        for key in path:
            if not isinstance(value, dict) or value.get(key) is None:
                return None
            value = value[key]
        return float(value)

    return read


def _excess(numerator: tuple[str, ...], denominator: tuple[str, ...]) -> Callable[[dict[str, Any]], float | None]:
    """How much one figure is above another, in percent."""
    top, bottom = _get(*numerator), _get(*denominator)

    def read(result: dict[str, Any]) -> float | None:
        a, b = top(result), bottom(result)
        return None if a is None or not b else (a / b - 1) * 100

    return read


def _difference(minuend: tuple[str, ...], subtrahend: tuple[str, ...]) -> Callable[[dict[str, Any]], float | None]:
    first, second = _get(*minuend), _get(*subtrahend)

    def read(result: dict[str, Any]) -> float | None:
        a, b = first(result), second(result)
        return None if a is None or b is None else a - b

    return read


ALONE = ("first_request", "small_first_ms")

ROWS = [
    Row("events in the big team", None, _get("ledger", "big_team_events"), lambda v: f"{v:,.0f}"),
    Row("build (whole ledger, history projected)", None, _get("ledger", "build_seconds"), _s),
    Row("build rate", None, _get("ledger", "build_events_per_s"), _per_s),
    Row(
        "cold load of the big team (`load_team`)",
        "≤ 50 ms",
        _get("cold_load", "snapshot", "ms"),
        _ms,
        lambda v: v <= 50,
    ),
    Row(
        "RSS growth during the cold load (peak)",
        "≤ 20 MB",
        _get("cold_load", "snapshot", "peak_growth_mb"),
        _mb,
        lambda v: v <= 20,
    ),
    Row(
        "  … events replayed after its latest snapshot",
        None,
        _get("cold_load", "snapshot", "replayed_events"),
        lambda v: f"{v:,.0f}",
    ),
    Row(
        "cold load, worst case (just before its latest snapshot)",
        "≤ 50 ms",
        _get("cold_load", "worst_case", "ms"),
        _ms,
        lambda v: v <= 50,
    ),
    Row(
        "  … events replayed after the snapshot before",
        None,
        _get("cold_load", "worst_case", "replayed_events"),
        lambda v: f"{v:,.0f}",
    ),
    Row("  … RSS growth (peak)", "≤ 20 MB", _get("cold_load", "worst_case", "peak_growth_mb"), _mb, lambda v: v <= 20),
    Row("cold load, full replay (snapshots ignored)", None, _get("cold_load", "full_replay", "ms"), _ms),
    Row("RSS growth during the full replay (peak)", None, _get("cold_load", "full_replay", "peak_growth_mb"), _mb),
    Row("gateway start (process start → first answer)", None, _get("first_request", "gateway_ready_s"), _s),
    Row(
        "first request after a restart (big team, the process's first)",
        "≤ 100 ms",
        _get("first_request", "big_ms"),
        _ms,
        lambda v: v <= 100,
    ),
    Row("  … a 100-event team's instead", None, _get("first_request", "process_first_ms"), _ms),
    Row("  … the big team's, after another team's", None, _get("first_request", "big_warm_process_ms"), _ms),
    Row("  … the 1,000-event team's, after another team's (alone)", None, _get(*ALONE), _ms),
    Row("  … the gateway's RSS after the big team's first request", None, _get("first_request", "gateway_rss_mb"), _mb),
    Row(
        "1,000-event team's first request while the big team loads, above alone",
        "≤ +10 ms",
        _difference(("alongside", "snapshots", "small_first_ms"), ALONE),
        _plus_ms,
        lambda v: v <= 10,
    ),
    Row("  … big team's first request meanwhile", None, _get("alongside", "snapshots", "big_first_ms"), _ms),
    Row(
        "same, big team without snapshots (full replay), above alone",
        "≤ +10 ms",
        _difference(("alongside", "full_replay", "small_first_ms"), ALONE),
        _plus_ms,
        lambda v: v <= 10,
    ),
    Row(
        "  … big team's first request meanwhile (its full replay)",
        None,
        _get("alongside", "full_replay", "big_first_ms"),
        _ms,
    ),
    Row(
        "  … 1,000-event team's p50 over its requests meanwhile",
        None,
        _get("alongside", "full_replay", "small", "p50_ms"),
        _ms,
    ),
    Row("  … and its slowest", None, _get("alongside", "full_replay", "small", "max_ms"), _ms),
    Row("  … the gateway's RSS after the full replay", None, _get("alongside", "full_replay", "gateway_rss_mb"), _mb),
    Row("steady p50, big team", None, _get("steady", "big", "p50_ms"), _ms),
    Row("steady p50, 1,000-event team", None, _get("steady", "baseline", "p50_ms"), _ms),
    Row(
        "steady p50, big team above the 1,000-event team",
        "≤ +10 %",
        _excess(("steady", "big", "p50_ms"), ("steady", "baseline", "p50_ms")),
        _pct,
        lambda v: v <= 10,
    ),
    Row("steady p99, big team", None, _get("steady", "big", "p99_ms"), _ms),
    Row("steady p99, 1,000-event team", None, _get("steady", "baseline", "p99_ms"), _ms),
    Row("projection backlog caught up (events)", None, _get("catch_up", "backlog_events"), lambda v: f"{v:,.0f}"),
    Row("  … caught up after (from the gateway's start)", None, _get("catch_up", "caught_up_s"), _s),
    Row("p50 during the catch-up (1,000-event team)", None, _get("catch_up", "during", "p50_ms"), _ms),
    Row(
        "p50 during the catch-up, above steady after it",
        "≤ +30 %",
        _excess(("catch_up", "during", "p50_ms"), ("catch_up", "after", "p50_ms")),
        _pct,
        lambda v: v <= 30,
    ),
    Row("`ledger verify`", "≤ 60 s", _get("tools", "verify", "seconds"), _s, lambda v: v <= 60),
    Row("  … its peak RSS", None, _get("tools", "verify", "peak_rss_mb"), _mb),
    Row(
        "`ledger rebuild`", "≥ 25,000 events/s", _get("tools", "rebuild", "events_per_s"), _per_s, lambda v: v >= 25_000
    ),
    Row("  … its time", None, _get("tools", "rebuild", "seconds"), _s),
    Row("  … its peak RSS", None, _get("tools", "rebuild", "peak_rss_mb"), _mb),
    Row("`ledger export --team big`", None, _get("tools", "export", "rows_per_s"), lambda v: f"{v:,.0f} rows/s"),
    Row("  … its time", None, _get("tools", "export", "seconds"), _s),
    Row("  … its peak RSS", None, _get("tools", "export", "peak_rss_mb"), _mb),
    Row(
        "export's peak RSS above exporting the 1,000-event team",
        f"≤ +{EXPORT_RSS_SLACK_MB:.0f} MB (constant)",
        _difference(("tools", "export", "peak_rss_mb"), ("tools", "export_small", "peak_rss_mb")),
        lambda v: f"{v:+,.1f} MB",
        lambda v: v <= EXPORT_RSS_SLACK_MB,
    ),
]


def check_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every row's figure for one backend, and its verdict where the issue sets a target."""
    checks = []
    for row in ROWS:
        value = row.value(result)
        verdict = "" if row.meets is None else ("n/a" if value is None else ("PASS" if row.meets(value) else "MISS"))
        checks.append(
            {
                "label": row.label,
                "target": row.target,
                "value": value,
                "verdict": verdict,
                "shown": "–" if value is None else row.shown(value),
            }
        )
    return checks


def table(results: dict[str, dict[str, Any]]) -> str:
    """Markdown: a row per figure, the target, and each backend's figure with its verdict."""
    names = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
    head = "| measure | target | " + " | ".join(names.get(b, b) for b in results) + " |"
    lines = [head, "|---|---|" + "---|" * len(results)]
    checks = {backend: result["targets"] for backend, result in results.items()}
    for i, row in enumerate(ROWS):
        cells = []
        for backend in results:
            check = checks[backend][i]
            cells.append(check["shown"] + (f" **{check['verdict']}**" if check["verdict"] else ""))
        lines.append(f"| {row.label} | {row.target or ''} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """One table of the backends of several ``--json`` files (the last file's run of a backend wins)."""
    results: dict[str, dict[str, Any]] = {}
    for name in argv if argv is not None else sys.argv[1:]:
        for backend, result in json.loads(Path(name).read_text())["backends"].items():
            results[backend] = {**result, "targets": check_targets(result)}
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
