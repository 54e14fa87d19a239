"""The stall finder's analysis (``scripts/bench/stalls.py``): which recorded spans explain the
requests slower than their run's p99, on synthetic runs and spans whose answer is known."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from scripts.bench.stalls import Run, Span, Timeline, analyse
from scripts.bench.stalls_render import render

P50 = 0.010


def run_with_outliers(outliers: list[float], latency: float = 0.1, n: int = 300) -> Run:
    """``n`` requests of 10 ms, one every 3 s / n from t=0 … and the outliers, sent at these times."""
    started = [i * 3.0 / n for i in range(n)] + outliers
    return Run(started, [P50] * n + [latency] * len(outliers))


def busy_writer(until: float) -> list[Span]:
    """A writer busy most of the time in short batches: normal, it explains nothing."""
    return [Span("writer.batch", t / 1000, t / 1000 + 0.002, 5) for t in range(0, int(until * 1000), 3)]


def test_each_outlier_is_put_down_to_the_long_span_it_overlaps():
    run = run_with_outliers([1.0, 2.0, 2.5])
    spans = [
        *busy_writer(3.0),
        Span("gc2", 1.02, 1.08, 1234, cpu=0.06),  # 60 ms inside the first outlier
        Span("loop.late", 2.01, 2.09, {"samples": 3, "stacks": [[3, "app/x.py:1 f"]], "threads": []}),
        Span("gc0", 2.55, 2.551, 10),  # far shorter than half the p50: explains nothing
        Span("gc2", 0.2, 0.25, 5),  # long, but while no outlier was in flight
    ]
    found = analyse([run], spans)
    assert found["outliers"] == 3
    assert found["requests"] == 303
    assert found["explained"] == 1
    assert found["loop_late_only"] == 1
    assert found["unexplained"] == 1
    assert found["episodes"] == 3
    kinds = found["kinds"]
    assert kinds["gc2"]["outliers"] == 1
    assert kinds["gc2"]["outliers_share"] == pytest.approx(1 / 3)
    assert kinds["writer.batch"]["outliers"] == 0  # busy two thirds of the time, never for long
    assert kinds["gc2"]["longest"][0]["ms"] == pytest.approx(60)
    assert kinds["gc2"]["cpu_ms_per_s"] is not None
    # The run's window is 0 … 3.0 s: 110 ms of gc2 in it, ~36.6 ms per second.
    assert kinds["gc2"]["ms_per_s"] == pytest.approx(110 / 3.0, rel=0.01)
    worst = {round(w["offset_s"], 2): w for w in found["worst"]}
    assert set(worst) == {1.0, 2.0, 2.5}
    (gc,) = [s for s in worst[1.0]["spans"] if s["kind"] == "gc2"]
    assert gc["at_ms"] == pytest.approx(20)
    assert gc["ms"] == pytest.approx(60)
    assert worst[2.5]["explained_by"] == []
    text = render("chat c=64", found)
    assert (
        "explained by a recorded cause: 1 of 3; only by the loop being late: 1; neither, nor by a slow step: 1" in text
    )
    assert "app/x.py:1 f" in text


def test_a_stall_that_slows_many_requests_is_one_episode_and_each_run_has_its_own_p99():
    slow = run_with_outliers([1.0, 1.01, 1.02, 1.03], latency=0.2, n=1000)
    # A second run, twice as slow throughout: its 20 ms requests are its median, not outliers.
    other = Run([i * 0.02 for i in range(300)] + [4.0], [0.02] * 300 + [0.3])
    found = analyse([slow, other], [Span("writer.save", 1.05, 1.15, 1)])
    assert found["outliers"] == 5
    assert found["episodes"] == 2
    assert found["kinds"]["writer.save"]["outliers"] == 4
    assert found["unexplained"] == 1
    assert len(found["worst"]) == 2  # one request per episode


def test_the_timeline_is_read_as_it_grows_and_waits_for_the_flush_mark(tmp_path: Path):
    path = tmp_path / "timeline.jsonl"
    first = {"pid": 1, "kind": "gc2", "start": 1.0, "end": 1.05, "detail": 3, "cpu": 0.05}
    path.write_text(json.dumps(first) + "\n" + '{"pid": 1, "kind": "writer.b')  # a line being written
    timeline = Timeline(path)
    timeline.read()
    assert [s.kind for s in timeline.spans] == ["gc2"]
    assert not timeline.wait_until(2.0, timeout=0.1)  # no mark yet: the process has not flushed

    def flush() -> None:
        time.sleep(0.2)
        with path.open("a") as f:
            f.write('atch", "start": 1.5, "end": 1.6, "detail": 4, "cpu": 0.001}\n')
            f.write(
                json.dumps(
                    {
                        "pid": 1,
                        "kind": "timeline.flush",
                        "start": 2.5,
                        "end": 2.5,
                        "detail": {"spans": 1, "dropped": 0},
                        "cpu": None,
                    }
                )
                + "\n"
            )

    writer = threading.Thread(target=flush)
    writer.start()
    assert timeline.wait_until(2.0, timeout=5)
    writer.join()
    assert [s.kind for s in timeline.spans] == ["gc2", "writer.batch", "timeline.flush"]
    assert timeline.spans[1].cpu == pytest.approx(0.001)


def test_a_slow_request_is_split_at_the_steps_the_gateway_marked():
    # Connection 5001 sent the outlier at t=1.0; the gateway had it 2 ms later, waited 80 ms for its
    # hold, and was done at t=1.095; every other request went straight through.
    run = Run([i * 0.01 for i in range(300)] + [1.0], [P50] * 300 + [0.1], [5000] * 300 + [5001])
    spans = [
        Span("request", 1.002, 1.095, [5001, 200, "req_slow"]),
        Span("mark", 1.0025, 1.0025, ["req_slow", "admitted"]),
        Span("mark", 1.0825, 1.0825, ["req_slow", "held"]),
        Span("mark", 1.0905, 1.0905, ["req_slow", "upstream"]),
        Span("mark", 1.094, 1.094, ["req_slow", "charged"]),
        *(Span("request", i * 0.01 + 0.001, i * 0.01 + 0.009, [5000, 200, f"req_{i}"]) for i in range(300)),
        *(
            Span("mark", i * 0.01 + at, i * 0.01 + at, [f"req_{i}", step])
            for i in range(300)
            for step, at in (("admitted", 0.0015), ("held", 0.0015), ("upstream", 0.006), ("charged", 0.008))
        ),
    ]
    found = analyse([run], spans)
    assert "request" not in found["kinds"]  # a request is not something the process did besides
    assert "mark" not in found["kinds"]
    (worst,) = found["worst"]
    assert worst["steps_ms"] == pytest.approx(
        {"app": 2, "admitted": 0.5, "held": 80, "upstream": 8, "charged": 3.5, "done": 1, "client": 5}
    )
    assert found["steps"]["outliers"]["held"] == pytest.approx(80)
    assert found["steps"]["slow"]["held"] == 1  # 80 ms where a typical request takes none
    assert found["steps"]["all"]["upstream"] == pytest.approx(4.5)
    assert found["steps"]["slow"]["upstream"] == 0
    assert worst["slow_steps"] == ["held"]
    assert found["unexplained"] == 0
    assert found["steps"]["all"]["app"] == pytest.approx(1)
    assert "held 80.0 / " in render("chat c=64", found)
