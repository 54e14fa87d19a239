"""The stall finder (``--stalls``): for every request slower than its run's p99, what the gateway
process was doing meanwhile.

Tollgate runs with ``TOLLGATE_TIMELINE`` set (``app/observability/timeline.py``): it appends spans
``(kind, start, end, detail, cpu, runq)`` of its garbage collections, late event-loop wake-ups
(with the loop thread's sampled stack), ledger writer batches and saves, credit-lease growths,
projector slices, log flushes, … to a file, on CLOCK_MONOTONIC; and every request it served (with
its client's port) and the steps each reached (admitted, held, upstream, charged). The load
generator stamps each request with its send time on the same clock and its connection's port
(``loadgen.py``). After each point (a case at a concurrency, over its rounds), the requests slower
than their own run's p99 — the outliers — are laid over the spans of the run's window.

An outlier is *explained* by a kind of span when that kind's long spans (at least ``LONG`` × the
run's p50: a writer busy all the time in short batches explains nothing) cover at least ``SHARE``
of the time it took beyond its run's p50 while it was in flight; and a step of it is *slow* when
it took that much longer than the same step of a typical request. Per kind the report gives the
share of outliers it explains, the time per second of run the kind took (on a CPU, waiting for
one, the rest blocked), and its longest spans; where the outliers' time went step by step against
every request's; how many outliers only a late loop explains (something held the loop that no
hook names: the sampled stacks say what) and how many nothing recorded explains; and the worst
request of each stall episode span by span.
"""

from __future__ import annotations

import bisect
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.observability.timeline import ENV
from scripts.bench.loadgen import Result
from scripts.bench.report import percentile

#: The share of an outlier's excess over its run's p50 a kind must cover to explain it ...
SHARE = 0.2
#: ... and at least this many seconds.
MIN_OVERLAP = 0.001
#: The loop being late is what a stall looks like from the loop, not what caused it.
SYMPTOM = "loop.late"
#: Only spans at least this long (a fraction of the run's p50) explain an outlier: a kind that is
#: always busy (the ledger writer) must not explain every slow request by being busy as always.
LONG = 0.5
#: In the worst requests' timelines, the spans at least this long, and this share of the latency.
DRAWN_SPAN = 0.001
DRAWN_SHARE = 0.02
WORST = 5
#: The gateway's spans of the requests it served (their client's port, status and id), and the
#: marks of the steps each reached (its id, the step).
SERVED = "request"
MARK = "mark"
#: A request reaches the gateway's application after it was sent; this much earlier is the same clock's noise.
CLOCK_SLACK = 0.0005
#: Seconds to wait for the gateway to append the spans of a run that just ended.
FLUSH_WAIT = 5.0


@dataclass(frozen=True, slots=True)
class Span:
    kind: str
    start: float
    end: float
    detail: Any = None
    pid: int = 0
    cpu: float | None = None  # the time its thread was on a CPU in it (None: not measured)
    runq: float | None = None  # ... and waited for a CPU (the rest of the span it was blocked)

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(slots=True)
class Run:
    """One run's requests: when each was sent (monotonic seconds) and how long it took."""

    started: list[float]
    latencies: list[float]
    ports: list[int] = field(default_factory=list)  # each request's connection (its local port)

    @property
    def window(self) -> tuple[float, float]:
        return min(self.started), max(s + lat for s, lat in zip(self.started, self.latencies, strict=True))


def _covered(intervals: list[tuple[float, float]]) -> float:
    """The time a set of intervals covers (overlaps counted once)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _overlapping(spans: list[Span], start: float, end: float) -> list[Span]:
    return [s for s in spans if s.start < end and s.end > start]


#: A request's steps, in order, each named by where it got to: the gateway's application had it,
#: it was admitted (parsed, authorised, counted, rate-limited), held (credits set aside), the
#: upstream answered (or its stream opened), it was charged (durably), the application was done
#: with it, the client had the whole answer.
STEPS = ("app", "admitted", "held", "upstream", "charged", "done", "client")


class Served:
    """The requests the gateway served (by the client port each came from, in order) and the marks
    each reached, to split a request the load generator timed into the steps it took."""

    def __init__(self, spans: list[Span]) -> None:
        by_port: dict[int, list[Span]] = {}
        self._marks: dict[str, dict[str, float]] = {}
        for s in spans:
            if s.kind == SERVED and s.detail and s.detail[0] is not None:
                by_port.setdefault(int(s.detail[0]), []).append(s)
            elif s.kind == MARK:
                request_id, what = s.detail
                self._marks.setdefault(request_id, {})[what] = s.start
        self._by_port = {port: sorted(served, key=lambda s: s.start) for port, served in by_port.items()}
        self._starts = {port: [s.start for s in served] for port, served in self._by_port.items()}

    def steps(self, port: int | None, started: float, finished: float) -> dict[str, float] | None:
        """How long the request sent at ``started`` on ``port`` took to reach each step (seconds)."""
        if port is None or port not in self._by_port:
            return None
        at = bisect.bisect_left(self._starts[port], started - CLOCK_SLACK)
        served = self._by_port[port]
        if at >= len(served) or served[at].start > finished:
            return None
        span = served[at]
        times = {
            "app": span.start,
            **self._marks.get(span.detail[2] if len(span.detail) > 2 else "", {}),
            "done": span.end,
            "client": finished,
        }
        steps: dict[str, float] = {}
        last = started
        # In the order they happened: a stream's client has its last chunk before the application is done.
        for step, moment in sorted(times.items(), key=lambda item: (item[1], STEPS.index(item[0]))):
            steps[step] = moment - last
            last = moment
        return steps


def _step_summary(steps: list[dict[str, float]]) -> dict[str, float] | None:
    """The median time to each step, in ms (over the requests that reached it)."""
    if not steps:
        return None
    return {step: statistics.median(found) * 1e3 for step in STEPS if (found := [s[step] for s in steps if step in s])}


def _tally(kinds: dict[str, dict[str, Any]], in_run: list[Span], begin: float, end: float, long: float) -> None:
    """Add a run's spans (clipped to its window) to each kind's totals; ``long``: seconds from which a
    span counts as long."""
    for s in in_run:
        k = kinds.setdefault(
            s.kind,
            {"spans": 0, "seconds": 0.0, "cpu": None, "runq": None, "long_spans": 0, "long_seconds": 0.0, "all": []},
        )
        clipped = min(s.end, end) - max(s.start, begin)
        k["spans"] += 1
        k["seconds"] += clipped
        for field_ in ("cpu", "runq"):
            value = getattr(s, field_)
            if value is not None:
                k[field_] = (k[field_] or 0.0) + value * (clipped / s.seconds if s.seconds > 0 else 1.0)
        if s.seconds >= long:
            k["long_spans"] += 1
            k["long_seconds"] += clipped
        k["all"].append(s)


def _outlier(
    in_run: list[Span], started: float, latency: float, p50: float, long: float, share: float
) -> dict[str, Any]:
    """A slow request and the spans it overlapped: the kinds whose long spans explain it."""
    finished = started + latency
    during = _overlapping(in_run, started, finished)
    covered = {
        kind: _covered(
            [(max(s.start, started), min(s.end, finished)) for s in during if s.kind == kind and s.seconds >= long]
        )
        for kind in {s.kind for s in during}
    }
    needed = max(MIN_OVERLAP, share * (latency - p50))
    return {
        "latency_ms": latency * 1e3,
        "p50_ms": p50 * 1e3,
        "over_3x_p50": latency > 3 * p50,
        "covered": covered,
        "explained_by": sorted(k for k, c in covered.items() if c >= needed),
        "spans": sorted(during, key=lambda s: s.start),
        "started": started,
        "finished": finished,
    }


def analyse(
    runs: list[Run], spans: list[Span], *, share: float = SHARE, long: float = LONG, worst: int = WORST
) -> dict[str, Any]:
    """Lay each run's outliers (slower than the run's p99) over the spans recorded meanwhile."""
    served = Served(spans)
    spans = [s for s in spans if s.kind not in (SERVED, MARK)]
    every_step: list[dict[str, float]] = []
    kinds: dict[str, dict[str, Any]] = {}
    outliers: list[dict[str, Any]] = []
    seconds = 0.0
    requests = 0
    for index, run in enumerate(runs):
        if not run.latencies:
            continue
        lat = sorted(run.latencies)
        p50, p99 = percentile(lat, 0.5), percentile(lat, 0.99)
        begin, end = run.window
        seconds += end - begin
        requests += len(run.latencies)
        in_run = _overlapping(spans, begin, end)
        _tally(kinds, in_run, begin, end, long * p50)
        ports: list[int | None] = list(run.ports) if run.ports else [None] * len(run.started)
        for started, latency, port in zip(run.started, run.latencies, ports, strict=True):
            steps = served.steps(port, started, started + latency)
            if steps is not None:
                every_step.append(steps)
            if latency > p99:
                outliers.append(
                    {
                        "run": index,
                        "offset_s": started - begin,
                        "steps": steps,
                        **_outlier(in_run, started, latency, p50, long * p50, share),
                    }
                )
    n = len(outliers)
    typical = _step_summary(every_step) or {}
    for o in outliers:  # the steps that took this outlier much longer than they take a typical request
        needed = max(MIN_OVERLAP, share * (o["latency_ms"] - o["p50_ms"]) / 1e3) * 1e3
        o["slow_steps"] = sorted(
            step for step, t in (o["steps"] or {}).items() if t * 1e3 - typical.get(step, 0.0) >= needed
        )
    outlier_seconds = sum(o["latency_ms"] for o in outliers) / 1e3
    table = {}
    for kind, k in sorted(kinds.items()):
        explains = sum(kind in o["explained_by"] for o in outliers)
        in_outliers = sum(o["covered"].get(kind, 0.0) for o in outliers)
        longest = sorted(k["all"], key=lambda s: -s.seconds)[:3]
        table[kind] = {
            "outliers": explains,
            "outliers_share": explains / n if n else 0.0,
            "ms_per_s": k["seconds"] * 1e3 / seconds if seconds else 0.0,
            "cpu_ms_per_s": k["cpu"] * 1e3 / seconds if seconds and k["cpu"] is not None else None,
            "runq_ms_per_s": k["runq"] * 1e3 / seconds if seconds and k["runq"] is not None else None,
            "per_s": k["spans"] / seconds if seconds else 0.0,
            "long_per_s": k["long_spans"] / seconds if seconds else 0.0,
            # the share of the outliers' time its long spans covered, against the share of the run's
            "long_share_of_outliers": in_outliers / outlier_seconds if outlier_seconds else 0.0,
            "long_share_of_run": k["long_seconds"] / seconds if seconds else 0.0,
            "longest": [_span_ms(s) for s in longest],
        }
    causes = [o for o in outliers if set(o["explained_by"]) - {SYMPTOM}]
    symptom_only = [o for o in outliers if o["explained_by"] == [SYMPTOM]]
    episodes = _episodes(outliers)
    worst_ones = sorted((max(e, key=lambda o: o["latency_ms"]) for e in episodes), key=lambda o: -o["latency_ms"])[
        :worst
    ]
    return {
        "requests": requests,
        "seconds": seconds,
        "outliers": n,
        "outliers_over_3x_p50": sum(o["over_3x_p50"] for o in outliers),
        "episodes": len(episodes),
        "explained": len(causes),
        "loop_late_only": len(symptom_only),
        "unexplained": sum(not o["explained_by"] and not o["slow_steps"] for o in outliers),
        "kinds": table,
        # Medians: of the outliers, and of every request (None: the gateway's requests were not recorded)
        "steps": {
            "outliers": _step_summary([o["steps"] for o in outliers if o["steps"]]),
            "all": typical or None,
            "slow": {step: sum(step in o["slow_steps"] for o in outliers) for step in STEPS},
        },
        "worst": [_drawn(o) for o in worst_ones],
        "rule": f"outlier: slower than its run's p99; explained by a kind whose spans of at least {long:g} × the "
        f"run's p50 cover ≥ {share:.0%} of its time beyond the p50 (≥ {MIN_OVERLAP * 1e3:.0f} ms); a step "
        f"is slow when it took that much longer than a typical request's",
    }


def _episodes(outliers: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The outliers grouped by the stretch of time they share (of one run: overlapping ones are one)."""
    episodes: list[list[dict[str, Any]]] = []
    reach = float("-inf")
    for o in sorted(outliers, key=lambda o: o["started"]):
        if o["started"] > reach:
            episodes.append([])
        episodes[-1].append(o)
        reach = max(reach, o["finished"])
    return episodes


def _drawn(outlier: dict[str, Any]) -> dict[str, Any]:
    """One outlier span by span: each span's start from the request's, and its length (the spans of
    at least ``DRAWN_SHARE`` of its latency)."""
    started, shortest = outlier["started"], max(DRAWN_SPAN, DRAWN_SHARE * outlier["latency_ms"] / 1e3)
    drawn = [s for s in outlier["spans"] if s.seconds >= shortest]
    return {
        "run": outlier["run"],
        "offset_s": outlier["offset_s"],
        "latency_ms": outlier["latency_ms"],
        "p50_ms": outlier["p50_ms"],
        "explained_by": outlier["explained_by"],
        "slow_steps": outlier["slow_steps"],
        "steps_ms": None if outlier["steps"] is None else {k: v * 1e3 for k, v in outlier["steps"].items()},
        "not_drawn": len(outlier["spans"]) - len(drawn),
        "spans": [{"kind": s.kind, "at_ms": (s.start - started) * 1e3, **_span_ms(s)} for s in drawn],
    }


def _span_ms(s: Span) -> dict[str, Any]:
    return {
        "ms": s.seconds * 1e3,
        "cpu_ms": None if s.cpu is None else s.cpu * 1e3,
        "runq_ms": None if s.runq is None else s.runq * 1e3,
        "detail": s.detail,
    }


class Timeline:
    """The gateway's timeline file, read as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self.spans: list[Span] = []
        self.flushed: dict[int, float] = {}  # per process, when it last appended
        self.dropped: dict[int, int] = {}

    def read(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1  # a line being appended is read next time
        self._offset += end
        for line in data[:end].splitlines():
            r = json.loads(line)
            span = Span(r["kind"], r["start"], r["end"], r["detail"], r["pid"], r.get("cpu"), r.get("runq"))
            if span.kind == "timeline.flush":
                self.flushed[span.pid] = span.start
                self.dropped[span.pid] = r["detail"]["dropped"]
            self.spans.append(span)

    def wait_until(self, moment: float, timeout: float = FLUSH_WAIT) -> bool:
        """Read until every process has appended what it recorded before ``moment``."""
        deadline = time.monotonic() + timeout
        while True:
            self.read()
            if self.flushed and min(self.flushed.values()) >= moment:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def forget_before(self, moment: float) -> None:
        self.spans = [s for s in self.spans if s.end >= moment]


@dataclass
class StallFinder:
    """The stall finder of one Tollgate configuration: its timeline file, and the runs of the point
    being measured (kept beside the timeline, ``….requests.jsonl``, for ``python -m scripts.bench.stalls``)."""

    path: Path
    runs: list[Run] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.timeline = Timeline(self.path)

    def env(self) -> dict[str, str]:
        return {ENV: str(self.path)}

    def add(self, result: Result) -> None:
        if result.started:
            self.runs.append(Run(list(result.started), list(result.latencies), list(result.ports)))

    def report(self, label: str) -> dict[str, Any]:
        """The point's outliers, explained (and the runs forgotten)."""
        runs, self.runs = self.runs, []
        if not runs:
            return {"outliers": 0, "requests": 0}
        with _requests_file(self.path).open("a") as f:
            f.write(json.dumps({"label": label, "runs": [[r.started, r.latencies, r.ports] for r in runs]}) + "\n")
        complete = self.timeline.wait_until(max(r.window[1] for r in runs))
        summary = analyse(runs, self.timeline.spans)
        summary["timeline"] = {
            "complete": complete,
            "dropped": sum(self.timeline.dropped.values()),
            "processes": len(self.timeline.flushed),
        }
        self.timeline.forget_before(max(r.window[1] for r in runs))
        return summary


def _requests_file(timeline: Path) -> Path:
    return timeline.with_suffix(".requests.jsonl")


def main(argv: list[str] | None = None) -> int:
    """Explain again the points of a kept run (``--stalls --keep``): ``python -m scripts.bench.stalls TIMELINE``."""
    import argparse

    from scripts.bench.stalls_render import render

    parser = argparse.ArgumentParser(prog="python -m scripts.bench.stalls", description=main.__doc__)
    parser.add_argument("timeline", type=Path, help="the timeline-*.jsonl file in the kept directory")
    parser.add_argument("--share", type=float, default=SHARE)
    parser.add_argument("--long", type=float, default=LONG)
    args = parser.parse_args(argv)
    timeline = Timeline(args.timeline)
    timeline.read()
    for line in _requests_file(args.timeline).read_text().splitlines():
        point = json.loads(line)
        runs = [Run(*run) for run in point["runs"]]
        print(render(point["label"], analyse(runs, timeline.spans, share=args.share, long=args.long)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
