"""A timeline of what a gateway process does besides serving requests, for the benchmark's stall
finder (``scripts/bench/stalls.py``): which spans of time went to cyclic garbage collection, to the
ledger writer's batches, the projector's slices, log flushes, … and when the event loop was late.

Off unless ``TOLLGATE_TIMELINE`` names a file. Off, an instrumented place costs one global look-up
and a no-op ``with``: ``timeline.span(kind, detail)`` returns a shared null context. On, each span
``(kind, start, end, detail, cpu, runq)`` — times from ``time.monotonic()`` (CLOCK_MONOTONIC on
Linux, the clock the load generator stamps its requests with, in another process); ``cpu``, the time
its thread was on a CPU meanwhile, ``runq`` the time it was ready to run but waited for a CPU (from
``/proc/thread-self/schedstat``); the rest of the span it was blocked: on the interpreter lock, a
database lock, the disk, the network — goes into a bounded in-memory buffer, and a thread appends
the buffer to the file every ``FLUSH_SECONDS`` and at exit, as JSON lines (one write per flush,
``O_APPEND``: the processes of ``--workers`` share one file).

Recorded besides the spans of the instrumented places:

- ``gc0`` / ``gc1`` / ``gc2``: every cyclic collection (``gc.callbacks``), with what it collected;
- ``loop.late``: a coroutine sleeps ``TICK`` seconds at a time and records a span whenever it wakes
  more than ``LATE`` late (from the wake-up it was due to when it ran): the loop was blocked, or
  starved of the interpreter lock. When the loop has not ticked for ``SAMPLE_AFTER``, a thread
  samples the loop thread's stack every ``SAMPLE_EVERY``; the span's detail names the stacks seen;
- ``request``: every request the application served, with its client's port and its id; and
  ``mark``: each step it reached (``admitted``, ``held``, ``upstream``, ``charged``). The only
  records made per request, each behind a check of ``timeline.on``;
- ``timeline.flush``: the recorder's own writes, and a mark after each, which tells a reader
  that every span ended before it is in the file.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import gc
import os
import re
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from time import monotonic, thread_time
from types import FrameType, TracebackType
from typing import Any

import msgspec

ENV = "TOLLGATE_TIMELINE"
#: Seconds between two appends to the file.
FLUSH_SECONDS = 0.5
#: Spans kept at most between two appends (the oldest are dropped, and counted, past that).
CAPACITY = 200_000
#: The loop watcher sleeps this long at a time ...
TICK = 0.002
#: ... and records a ``loop.late`` span when it wakes later than this after it was due.
LATE = 0.003
#: The loop thread's stack is sampled once the loop has not ticked for this long ...
SAMPLE_AFTER = 0.02
#: ... every this many seconds while it stays so.
SAMPLE_EVERY = 0.005
#: Frames kept of each sampled stack (the innermost).
STACK_DEPTH = 6

_encoder = msgspec.json.Encoder()


class _Null:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NULL = _Null()
_recorder: Recorder | None = None
#: Whether the timeline is recording: what a place on every request's path checks first.
on = False


def span(kind: str, detail: Any = None, *, cpu: bool = True) -> AbstractContextManager[None]:
    """``with timeline.span("writer.batch", len(batch)):`` — the block's time, as a span of ``kind``,
    with the CPU time its thread spent meanwhile (what it did not spend waiting: for the interpreter
    lock, a database lock, the disk). ``cpu=False`` for a block that awaits: its thread, the loop's,
    runs other work meanwhile."""
    recorder = _recorder
    if recorder is None:
        return _NULL
    return _Span(recorder, kind, detail, cpu)


class _Span:
    __slots__ = ("_cpu", "_detail", "_kind", "_recorder", "_start", "_started_cpu")

    def __init__(self, recorder: Recorder, kind: str, detail: Any, cpu: bool) -> None:
        self._recorder, self._kind, self._detail, self._cpu = recorder, kind, detail, cpu
        self._start = 0.0
        self._started_cpu: tuple[float, float | None] = (0.0, None)

    def __enter__(self) -> None:
        if self._cpu:
            self._started_cpu = scheduled()
        self._start = monotonic()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        end = monotonic()
        if self._cpu:
            (cpu, runq), (cpu0, runq0) = scheduled(), self._started_cpu
            self._recorder.add(
                self._kind,
                self._start,
                end,
                self._detail,
                cpu - cpu0,
                None if runq is None or runq0 is None else runq - runq0,
            )
        else:
            self._recorder.add(self._kind, self._start, end, self._detail)


_thread = threading.local()


def scheduled() -> tuple[float, float | None]:
    """This thread's time on a CPU so far, and its time waiting for one (None where the kernel does
    not say: then the CPU time is the interpreter's ``thread_time``)."""
    fd = getattr(_thread, "schedstat", None)
    if fd is None:
        try:
            fd = _thread.schedstat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            fd = _thread.schedstat = -1
    if fd < 0:
        return thread_time(), None
    on_cpu, waiting, _ = os.pread(fd, 100, 0).split()
    return int(on_cpu) / 1e9, int(waiting) / 1e9


def request(start: float, end: float | None, client: Any, status: int, request_id: str) -> None:
    """A request the application served (``perf_counter`` times: CLOCK_MONOTONIC too, on Linux),
    with its client's port: the benchmark tells its connections apart by their ports, and finds
    each of its requests here."""
    recorder = _recorder
    if recorder is not None and end is not None:
        recorder.add("request", start, end, [client[1] if client else None, status, request_id])


def mark(what: str, record: Any) -> None:
    """A request (its ``RequestRecord``) got this far (``admitted``, ``held``, ``upstream``,
    ``charged``): the benchmark splits a slow request's time at its marks."""
    recorder = _recorder
    if recorder is not None and record is not None:
        now = monotonic()
        recorder.add("mark", now, now, [record.request_id, what])


def traced(obj: object, method: str, kind: str) -> None:
    """Record every call of ``obj.method`` as a span of ``kind`` (for a class that may not import
    this module, as ``app/store``'s may not: the process registry's heartbeat); nothing when the
    timeline is off."""
    if _recorder is None:
        return
    original: Callable[..., Any] = getattr(obj, method)

    def call(*args: Any, **kwargs: Any) -> Any:
        with span(kind):
            return original(*args, **kwargs)

    setattr(obj, method, call)


def start_from_environment() -> Recorder | None:
    """Start recording if ``TOLLGATE_TIMELINE`` names a file (once per process)."""
    global _recorder, on
    path = os.environ.get(ENV)
    if _recorder is None and path:
        _recorder = Recorder(path).start()
        atexit.register(_recorder.stop)
        on = True
    return _recorder


def stop() -> None:
    """Stop recording in this process (what is recorded is appended first)."""
    global _recorder, on
    recorder, _recorder, on = _recorder, None, False
    if recorder is not None:
        recorder.stop()
        atexit.unregister(recorder.stop)


def watch_loop() -> list[asyncio.Task[None]]:
    """On the serving loop: the loop watcher's task, if the timeline is on (none otherwise)."""
    if _recorder is None:
        return []
    return [asyncio.get_running_loop().create_task(_recorder.watch_loop())]


class Recorder:
    def __init__(self, path: str, capacity: int = CAPACITY) -> None:
        self.path = path
        self.pid = os.getpid()
        self.dropped = 0
        self._spans: collections.deque[tuple[str, float, float, Any, float | None, float | None]] = collections.deque(
            maxlen=capacity
        )
        self._stopped = threading.Event()
        self._writer = threading.Thread(target=self._write_regularly, name="tollgate-timeline", daemon=True)
        self._write_lock = threading.Lock()
        self._gc_started = 0.0
        self._loop_thread: int | None = None
        self._loop_tick = 0.0  # when the loop watcher last ran
        #: Sampled since the loop last ran: the loop thread's stack, and what the other threads were at.
        self._samples: list[tuple[str, list[str]]] = []
        self._sampler: threading.Thread | None = None

    def start(self) -> Recorder:
        gc.callbacks.append(self._on_gc)
        self._writer.start()
        return self

    def stop(self) -> None:
        """Stop recording, and append what is left."""
        self._stopped.set()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        for thread in (self._writer, self._sampler):
            if thread is not None and thread.is_alive() and thread is not threading.current_thread():
                thread.join(timeout=5)
        self.flush()

    def add(
        self,
        kind: str,
        start: float,
        end: float,
        detail: Any = None,
        cpu: float | None = None,
        runq: float | None = None,
    ) -> None:
        spans = self._spans
        if len(spans) == spans.maxlen:
            self.dropped += 1
        spans.append((kind, start, end, detail, cpu, runq))  # deque.append is atomic: any thread may record

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        # A collection runs to its end on the thread that started it, and never two at once.
        if phase == "start":
            self._gc_started = monotonic()
        else:
            self.add(f"gc{info['generation']}", self._gc_started, monotonic(), info["collected"])

    # -- the loop -------------------------------------------------------------------------------

    async def watch_loop(self) -> None:
        """Sleep ``TICK`` at a time; a wake-up later than ``LATE`` is a span of the loop being late,
        with the loop thread's CPU and run-queue time from the tick before (``TICK`` more than the
        span: what the loop did in those seconds — ran, waited for a CPU, or was blocked)."""
        self._loop_thread = threading.get_ident()
        self._loop_tick = monotonic()
        if self._sampler is None:
            self._sampler = threading.Thread(target=self._sample_stalls, name="tollgate-timeline-sampler", daemon=True)
            self._sampler.start()
        cpu, runq = scheduled()
        while True:
            due = monotonic() + TICK
            await asyncio.sleep(TICK)
            now = self._loop_tick = monotonic()
            was_cpu, was_runq = cpu, runq
            cpu, runq = scheduled()
            if now - due > LATE:
                samples, self._samples = self._samples, []
                self.add(
                    "loop.late",
                    due,
                    now,
                    _top(samples) if samples else None,
                    cpu - was_cpu,
                    None if runq is None or was_runq is None else runq - was_runq,
                )
            elif self._samples:
                self._samples = []

    def _sample_stalls(self) -> None:
        while not self._stopped.wait(SAMPLE_EVERY):
            if monotonic() - self._loop_tick < SAMPLE_AFTER or self._loop_thread is None:
                continue
            frames = sys._current_frames()
            frame = frames.pop(self._loop_thread, None)
            if frame is None:
                continue
            names = {t.ident: t.name for t in threading.enumerate()}
            others = [
                f"{names.get(ident, ident)}: {_stack(f, 2)}"
                for ident, f in frames.items()
                if f.f_code.co_name != "wait" and not str(names.get(ident)).startswith("tollgate-timeline")
            ]
            self._samples.append((_stack(frame), others))

    # -- the file -------------------------------------------------------------------------------

    def _write_regularly(self) -> None:
        while not self._stopped.wait(FLUSH_SECONDS):
            self.flush()

    def flush(self) -> None:
        """Append every span recorded so far, then a ``timeline.flush`` mark (one write)."""
        with self._write_lock:
            started = monotonic()
            spans, pid, lines = self._spans, self.pid, []
            while True:
                try:
                    kind, start, end, detail, cpu, runq = spans.popleft()
                except IndexError:
                    break
                lines.append(
                    _encoder.encode(
                        {
                            "pid": pid,
                            "kind": kind,
                            "start": start,
                            "end": end,
                            "detail": detail,
                            "cpu": cpu,
                            "runq": runq,
                        }
                    )
                )
            lines.append(
                _encoder.encode(
                    {
                        "pid": pid,
                        "kind": "timeline.flush",
                        "start": started,
                        "end": monotonic(),
                        "detail": {"spans": len(lines), "dropped": self.dropped},
                    }
                )
            )
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, b"\n".join(lines) + b"\n")
            finally:
                os.close(fd)


def _stack(frame: FrameType | None, depth: int = STACK_DEPTH) -> str:
    """The innermost frames of a stack, innermost first: ``file.py:line function < …``."""
    parts: list[str] = []
    while frame is not None and len(parts) < depth:
        code = frame.f_code
        parts.append(f"{_short(code.co_filename)}:{frame.f_lineno} {code.co_name}")
        frame = frame.f_back
    return " < ".join(parts)


_STDLIB = re.compile(r"python3\.\d+/(.+)$")


def _short(filename: str) -> str:
    """A source file's path from its package on (``…/site-packages/`` and the checkout dropped)."""
    at = filename.rfind("site-packages/")
    if at >= 0:
        return filename[at + len("site-packages/") :]
    for top in ("/app/", "/projections/", "/domain/"):
        at = filename.rfind(top)
        if at >= 0:
            return filename[at + 1 :]
    found = _STDLIB.search(filename)
    return found.group(1) if found else filename


def _top(samples: list[tuple[str, list[str]]]) -> dict[str, Any]:
    """What the loop thread was doing while the loop was late (the stacks seen, most frequent
    first), and the other threads not waiting on a condition (the GIL's other takers)."""
    stacks = collections.Counter(stack for stack, _ in samples).most_common(3)
    threads = collections.Counter(other for _, others in samples for other in others).most_common(6)
    return {
        "samples": len(samples),
        "stacks": [[n, stack] for stack, n in stacks],
        "threads": [[n, where] for where, n in threads],
    }
