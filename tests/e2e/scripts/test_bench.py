"""The gateway benchmark runs end to end (``--quick``: tiny runs) and reports every case at every
concurrency, with the ratios and the ledger check. Its numbers are not judged here: performance
claims come from the benchmark itself, never from a timed unit test."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

from scripts.bench.options import CASE_NAMES
from tests.support.gateway import tollgate_command


def test_the_quick_benchmark_reports_every_case_and_concurrency(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, "-m", "scripts.bench", "--quick", "--backend", "sqlite", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,  # nine cases at two concurrencies, on a loaded 2-core machine
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["upstream_direct"]["rps"] > 0
    assert report["upstream_direct"]["cpu_ms_per_request"] > 0
    (config,) = report["configs"]
    assert config["backend"] == "sqlite"
    assert config["workers"] == 1
    assert set(config["cases"]) == set(CASE_NAMES)
    for case, by_concurrency in config["cases"].items():
        assert set(by_concurrency) == {"1", "4"}, case
        for point in by_concurrency.values():
            for target in ("direct", "floor", "tollgate"):
                m = point[target]
                assert m["requests"] > 0, (case, target, m)
                assert m["errors"] == 0, (case, target, m)
                assert m["rps"] > 0, (case, target, m)
                assert m["p50_ms"] > 0, (case, target, m)
                assert m["p99_ms"] >= m["p50_ms"], (case, target, m)
                assert m["cpu_ms_per_request"] > 0, (case, target, m)
            for target in ("floor", "tollgate"):
                assert {"added_p50_ms", "added_p99_ms", "added_ttfc_p50_ms"} <= set(point[target])
            assert set(point["ratios"]) == {
                "rps",
                "cpu_ms_per_request",
                "p50_ms",
                "added_p50_ms",
                "added_p99_ms",
                "added_ttfc_p50_ms",
            }
            assert point["ratios"]["rps"] > 0
            assert point["ratios"]["cpu_ms_per_request"] > 0
    # The event loop's own CPU (each process's main thread, during the runs): a part of the whole,
    # summed over the points (one point's few requests are a handful of 10 ms clock ticks).
    points = [point["tollgate"] for by_concurrency in config["cases"].values() for point in by_concurrency.values()]
    loop = sum(m["loop_cpu_ms_per_request"] * m["requests"] for m in points)
    whole = sum(m["cpu_ms_per_request"] * m["requests"] for m in points)
    assert 0 < loop < whole, (loop, whole)
    assert "Tollgate's event loop (the main thread) per request" in result.stdout
    assert config["peak_rss_mb"]["tollgate"]["max"] > 0
    assert config["peak_rss_mb"]["floor"]["max"] > 0
    # Every request Tollgate answered is exactly one charge in a ledger that verifies.
    assert config["ledger"]["verified"]
    assert config["ledger"]["charges"] == config["ledger"]["answered"] > 0
    assert {t["verdict"] for t in config["targets"]} <= {"PASS", "MISS", "n/a"}
    assert "tollgate/floor" in result.stdout
    assert "| target | limit | measured | verdict |" in result.stdout


def test_tollgate_bench_takes_the_benchmark_options():
    result = subprocess.run([*tollgate_command(), "bench", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for option in (
        "--backend",
        "--workers",
        "--duration",
        "--rounds",
        "--concurrency",
        "--cases",
        "--soak",
        "--quick",
        "--json",
    ):
        assert option in result.stdout


def test_the_stall_finder_explains_each_point_and_the_load_spreads_over_many_teams(tmp_path):
    """``--stalls``: each point explained from Tollgate's timeline. ``--teams N``: N teams, each with its
    key; connection i uses team i mod N, and every answered request is still exactly one charge,
    whichever team it went to. (One run for both: each quick benchmark costs half a minute of a make
    test half in starting its servers.)"""
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.bench",
            "--quick",
            "--backend",
            "sqlite",
            "--cases",
            "chat",
            "--concurrency",
            "1,6",
            "--teams",
            "3",
            "--stalls",
            "--keep",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    workdir = Path(re.search(r"the servers' logs are in (\S+)", result.stderr).group(1))
    try:
        (config,) = json.loads(out.read_text())["configs"]
        assert config["ledger"]["verified"]
        assert config["ledger"]["charges"] == config["ledger"]["answered"] > 0
        (db,) = workdir.glob("*.db")
        with closing(sqlite3.connect(db)) as conn:
            names = dict(conn.execute("SELECT team_id, team_name FROM team_balances").fetchall())
            charged = dict(conn.execute("SELECT team_id, COUNT(*) FROM charged_requests GROUP BY team_id").fetchall())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert sorted(names.values()) == ["bench", "bench-1", "bench-2"]
    assert set(charged) == set(names)  # each team's key carried requests
    assert sum(charged.values()) == config["ledger"]["charges"]

    assert set(config["cases"]["chat"]) == {"1", "6"}
    for concurrency, point in config["cases"]["chat"].items():
        stalls = point["stalls"]
        assert stalls["requests"] == point["tollgate"]["requests"], concurrency
        assert stalls["timeline"]["complete"], concurrency
        assert stalls["timeline"]["processes"] == 1
        # Every request went through the ledger writer: its batches are on the timeline, with their CPU time.
        assert stalls["kinds"]["writer.batch"]["per_s"] > 0, stalls["kinds"]
        assert stalls["kinds"]["writer.save"]["cpu_ms_per_s"] > 0
        assert stalls["explained"] + stalls["loop_late_only"] + stalls["unexplained"] <= stalls["outliers"]
        # Each request found on the gateway's side by its connection, and split at the steps it reached.
        assert set(stalls["steps"]["all"]) == {"app", "admitted", "held", "upstream", "charged", "done", "client"}
        assert 0 < stalls["steps"]["all"]["upstream"] < 1000
        assert f"stalls, chat c={concurrency}:" in result.stdout
