"""The benchmark's verdicts on issue #17's targets, from the numbers a run produced."""

from __future__ import annotations

from typing import Any

from scripts.bench.report import check_targets, scaling_targets


def _point(p50: float, p99: float, cpu: float, rps: float, floor_cpu: float = 0.2, ttfc: float = 0.0) -> dict[str, Any]:
    return {
        "tollgate": {
            "p50_ms": p50,
            "p99_ms": p99,
            "cpu_ms_per_request": cpu,
            "rps": rps,
            "added_p50_ms": p50 - 0.1,
            "added_p99_ms": p99 - 0.2,
            "added_ttfc_p50_ms": ttfc,
        },
        "ratios": {"cpu_ms_per_request": cpu / floor_cpu},
    }


def _config(backend: str, workers: int, teams: int, chat64: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "backend": backend,
        "workers": workers,
        "teams": teams,
        "cases": {"chat": {"64": chat64}, **more},
        "peak_rss_mb": {"tollgate": {"max": 140.0}},
    }


def _verdicts(checks: list[dict[str, Any]]) -> dict[str, str]:
    return {f"{c['target']} {c['limit']}": c["verdict"] for c in checks}


def test_a_stalling_tail_and_a_costly_request_miss_and_a_fast_steady_one_passes():
    stalled = _verdicts(check_targets(_config("sqlite", 1, 1, _point(30, 200, 0.6, 1500)), None))
    assert stalled["p99 / p50, chat, c=64 ≤ 3 ×"] == "MISS"
    assert stalled["CPU/request, chat, c=64 ≤ 0.45 ms"] == "MISS"
    assert stalled["requests/s, chat, c=64, one worker ≥ 1,800"] == "MISS"
    steady = _verdicts(check_targets(_config("sqlite", 1, 1, _point(30, 60, 0.4, 1900)), None))
    assert steady["p99 / p50, chat, c=64 ≤ 3 ×"] == "PASS"
    assert steady["CPU/request, chat, c=64 ≤ 0.45 ms"] == "PASS"
    assert steady["requests/s, chat, c=64, one worker ≥ 1,800"] == "PASS"
    postgres = _verdicts(check_targets(_config("postgresql", 1, 1, _point(30, 60, 0.5, 1900)), None))
    assert postgres["CPU/request, chat, c=64 ≤ 0.55 ms"] == "PASS"


def test_a_stream_is_held_to_the_cost_of_a_plain_request_and_a_prompt_first_chunk():
    stream = {"64": _point(40, 100, 0.7, 1000, ttfc=8.0)}
    checks = _verdicts(check_targets(_config("sqlite", 1, 1, _point(30, 60, 0.5, 1500), chat_stream=stream), None))
    assert checks["CPU/request, 20-chunk stream vs chat, c=64 ≤ 1.3 ×"] == "MISS"  # 1.4 ×
    assert checks["added time to first chunk p50, stream, c=64 ≤ 5 ms"] == "MISS"
    assert checks["p99 / p50, stream, c=64 ≤ 3 ×"] == "PASS"


def test_two_workers_are_judged_against_one_on_the_same_backend_and_teams():
    configs = [
        _config("postgresql", 1, 50, _point(30, 60, 0.5, 1500)),
        _config("postgresql", 2, 50, _point(30, 60, 0.5, 2600)),
        _config("postgresql", 1, 1, _point(30, 60, 0.5, 1500)),
        _config("postgresql", 2, 1, _point(30, 60, 0.5, 1300)),
    ]
    verdicts = _verdicts(scaling_targets(configs))
    assert verdicts == {
        "2 workers / 1, postgresql, 50 teams ≥ 1.6 ×": "PASS",
        "2 workers / 1, postgresql, one team ≥ 1.0 × (no worse)": "MISS",
    }
    many = _verdicts(check_targets(configs[1], None))
    assert many["requests/s, chat, c=64, 2 workers, 50 team(s) ≥ 2,500"] == "PASS"
    one_team = check_targets(configs[3], None)
    assert [c["verdict"] for c in one_team if c["target"].startswith("requests/s")] == ["n/a"]
