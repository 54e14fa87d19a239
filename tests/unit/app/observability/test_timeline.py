"""The timeline recorder (``app/observability/timeline.py``): off unless ``TOLLGATE_TIMELINE`` names
a file, and then every cyclic collection, every late wake-up of the event loop (with the stack that
held it) and the spans of the instrumented places end up in that file, on the monotonic clock."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.observability import timeline
from tests.support.in_process import InProcessGateway


def spans(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def recording(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "timeline.jsonl"
    monkeypatch.setenv(timeline.ENV, str(path))
    assert timeline.start_from_environment() is not None
    yield path
    timeline.stop()


def test_a_collection_is_a_span_of_its_generation_with_what_it_collected(recording: Path):
    class Cycle:
        def __init__(self) -> None:
            self.me = self

    for _ in range(100):
        Cycle()
    before = time.monotonic()
    gc.collect()
    after = time.monotonic()
    timeline.stop()
    (full,) = [s for s in spans(recording) if s["kind"] == "gc2" and s["start"] >= before]
    assert before <= full["start"] <= full["end"] <= after
    assert full["detail"] >= 100  # the cycles, each with its __dict__
    assert full["pid"] > 0


def test_a_span_is_the_time_of_its_block_and_survives_an_exception(recording: Path):
    with timeline.span("writer.batch", 7):
        time.sleep(0.02)
    with pytest.raises(ValueError, match="broken"), timeline.span("log.flush"):
        raise ValueError("broken")
    timeline.stop()
    found = {s["kind"]: s for s in spans(recording)}
    assert found["writer.batch"]["detail"] == 7
    wall = found["writer.batch"]["end"] - found["writer.batch"]["start"]
    assert 0.02 <= wall < 0.5
    # It slept: blocked, not on a CPU, for most of its 20 ms. How long it then waited for a CPU is
    # the machine's load (18 ms seen with both cores busy), so that is only bounded by the span.
    assert 0 <= found["writer.batch"]["cpu"] < 0.01
    assert 0 <= found["writer.batch"]["runq"] <= wall
    assert "log.flush" in found
    # The mark that tells a reader everything ended before it is in the file.
    assert spans(recording)[-1]["kind"] == "timeline.flush"


def test_a_blocked_loop_is_a_late_span_with_the_stack_that_blocked_it(recording: Path):
    def blocking_the_loop() -> None:
        time.sleep(0.08)

    async def main() -> tuple[float, float]:
        (watcher,) = timeline.watch_loop()
        await asyncio.sleep(0.03)
        started = time.monotonic()
        blocking_the_loop()
        ended = time.monotonic()
        await asyncio.sleep(0.03)
        watcher.cancel()
        return started, ended

    started, ended = asyncio.run(main())
    timeline.stop()
    late = [s for s in spans(recording) if s["kind"] == "loop.late" and s["end"] - s["start"] > 0.05]
    assert len(late) == 1, late
    assert late[0]["start"] <= started + timeline.TICK
    assert late[0]["end"] >= ended
    assert late[0]["cpu"] < 0.04  # the loop thread slept through its 80 ms
    stacks = late[0]["detail"]["stacks"]
    assert late[0]["detail"]["samples"] >= 5
    assert "blocking_the_loop" in stacks[0][1]


def test_off_nothing_is_recorded_and_no_thread_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(timeline.ENV, raising=False)
    assert timeline.start_from_environment() is None
    with timeline.span("writer.batch", 1):
        gc.collect()

    class Beating:
        def beat(self) -> None:
            pass

    registry = Beating()
    timeline.traced(registry, "beat", "heartbeat")
    assert "beat" not in vars(registry)  # the method itself, not a wrapper
    assert not any(t.name.startswith("tollgate-timeline") for t in threading.enumerate())
    assert timeline.span("x") is timeline.span("y")  # one shared null context
    assert list(tmp_path.iterdir()) == []


def test_a_gateway_records_its_writer_batches_and_its_loop(recording: Path, gateway: InProcessGateway):
    team = gateway.open_team("timeline")
    for _ in range(3):
        answer = gateway.post(
            team, "/v1/chat/completions", {"model": "demo-gpt", "messages": [{"role": "user", "content": "hi"}]}
        )
        assert answer.status_code == 200
    gateway.stop()
    timeline.stop()
    recorded = spans(recording)
    kinds = {s["kind"] for s in recorded}
    assert {"writer.batch", "writer.save", "timeline.flush", "lease.grow"} <= kinds, kinds
    # Each request served, and the steps each chat reached, under its id, in order.
    marks: dict[str, list[dict[str, Any]]] = {}
    for s in recorded:
        if s["kind"] == "mark":
            marks.setdefault(s["detail"][0], []).append(s)
    chats = [s for s in recorded if s["kind"] == "request" and s["detail"][2] in marks]
    assert len(chats) == 3
    for request in chats:
        assert request["detail"][1] == 200
        assert isinstance(request["detail"][0], int)  # the client's port
        steps = marks[request["detail"][2]]
        assert [m["detail"][1] for m in steps] == ["admitted", "held", "upstream", "charged"]
        assert request["start"] <= steps[0]["start"] <= steps[-1]["start"] <= request["end"]
