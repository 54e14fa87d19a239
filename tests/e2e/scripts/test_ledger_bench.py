"""The ledger benchmark runs end to end and reports every scenario (tiny sizes; numbers not judged)."""

from __future__ import annotations

import json

from scripts.ledger_bench import main
from tests.support.backend import BACKEND


def test_the_benchmark_reports_every_scenario(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert (
        main(
            [
                "--requests",
                "60",
                "--concurrency",
                "4",
                "--naive-requests",
                "20",
                "--backends",
                BACKEND,
                "--json",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())["backends"][BACKEND]
    assert set(report) == {
        "writer_hot_team",
        "writer_1000_teams",
        "naive_hot_team_1_thread",
        "naive_hot_team_8_threads",
        "rebuild",
    }
    assert report["writer_hot_team"]["requests"] == 60
    assert report["naive_hot_team_8_threads"]["requests"] == 20
    assert report["rebuild"]["events"] > 120
    assert "x the naive 1-thread baseline" in capsys.readouterr().out
