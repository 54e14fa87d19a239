"""A closed-loop HTTP/1.1 load generator: C keep-alive connections, each sending its next request
the moment the previous answer is complete.

Closed loop, because the question is what the server costs per request and how fast it can go, and
a closed loop never queues more than C requests whatever the server does. An HTTP client library
(httpx, aiohttp) would spend more CPU per request than the servers it measures, so each connection
is a raw ``asyncio.Protocol`` on uvloop writing pre-rendered request bytes and parsing the answer
with httptools. It runs in processes of its own (``LoadGenerators``), so its CPU is never counted
as the server's, and a high concurrency can be split over several of them.

Per request it records when it was sent, its latency (request written → answer complete) and, for
every answer, the time to its first body chunk (what a streaming client waits before the first
token). Times are ``time.monotonic()``: CLOCK_MONOTONIC, the clock a gateway's timeline uses in its
own process (``app/observability/timeline.py``), so the stall finder can lay the two side by side. With ``rate``
the connections are paced (the soak test): each sends at most ``rate / C`` requests per second.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import multiprocessing
import time
from array import array
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from typing import Any, cast

import httptools
import uvloop


def render_request(host: str, port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return (
        f"POST {path} HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n{head}"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


@dataclass(frozen=True, slots=True)
class Target:
    """Where the load goes: a server's address."""

    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Load:
    """What a run sends and how hard: ``request`` (rendered bytes, or one per team's key, connection
    ``i`` sending the ``i``-th modulo their number) over ``connections`` closed loops for ``duration``
    seconds, paced to ``rate`` requests per second in all when it is above 0."""

    request: bytes | list[bytes]
    connections: int
    duration: float
    rate: float = 0.0


@dataclass
class Result:
    """One run, merged over the generator processes."""

    ok: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies: array[float] = field(default_factory=lambda: array("d"))  # seconds
    first_chunk: array[float] = field(default_factory=lambda: array("d"))  # seconds
    started: array[float] = field(default_factory=lambda: array("d"))  # time.monotonic() when each was sent
    ports: array[int] = field(default_factory=lambda: array("i"))  # the local port of each one's connection
    statuses: dict[int, int] = field(default_factory=dict)

    def merge(self, other: dict[str, Any]) -> None:
        self.ok += other["ok"]
        self.errors += other["errors"]
        self.seconds = max(self.seconds, other["seconds"])
        self.latencies.frombytes(other["latencies"])
        self.first_chunk.frombytes(other["first_chunk"])
        self.started.frombytes(other["started"])
        self.ports.frombytes(other["ports"])
        for status, n in other["statuses"].items():
            self.statuses[status] = self.statuses.get(status, 0) + n


class _Client(asyncio.Protocol):
    def __init__(self, run: _Run, index: int = 0) -> None:
        self.run = run
        # What this connection sends: with one request per team's key (``--teams``), the index-th of them.
        self.request = run.request if isinstance(run.request, bytes) else run.request[index % len(run.request)]
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.sent = self.first = 0.0
        self.status = 0
        self.next_at = 0.0
        self.done = False
        self.port = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's transport
        self.port = int(transport.get_extra_info("sockname")[1])

    def send(self) -> None:
        run = self.run
        now = time.monotonic()
        if now >= run.deadline:
            self.finish()
            return
        if run.interval:
            self.next_at = max(self.next_at + run.interval, now)
            if self.next_at > now:
                run.loop.call_later(self.next_at - now, self._send_now)
                return
        self._send_now()

    def _send_now(self) -> None:
        self.first = 0.0
        self.sent = time.monotonic()
        self.transport.write(self.request)  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.run.errors += 1
            self.finish()

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        if not self.first:
            self.first = time.monotonic()

    def on_message_complete(self) -> None:
        now = time.monotonic()
        run = self.run
        run.statuses[self.status] = run.statuses.get(self.status, 0) + 1
        if self.status == 200:
            run.ok += 1
            run.latencies.append(now - self.sent)
            run.first_chunk.append((self.first or now) - self.sent)
            run.started.append(self.sent)
            run.ports.append(self.port)
        else:
            run.errors += 1
        run.last = now
        self.send()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done:
            self.run.errors += 1
            self.finish()

    def finish(self) -> None:
        if not self.done:
            self.done = True
            if self.transport is not None:
                self.transport.close()
            self.run.finished()


@dataclass
class _Run:
    loop: asyncio.AbstractEventLoop
    request: bytes | list[bytes]
    deadline: float
    interval: float  # seconds between one connection's requests when paced, else 0
    pending: int
    all_done: asyncio.Future[None]
    ok: int = 0
    errors: int = 0
    last: float = 0.0
    latencies: array[float] = field(default_factory=lambda: array("d"))
    first_chunk: array[float] = field(default_factory=lambda: array("d"))
    started: array[float] = field(default_factory=lambda: array("d"))
    ports: array[int] = field(default_factory=lambda: array("i"))
    statuses: dict[int, int] = field(default_factory=dict)

    def finished(self) -> None:
        self.pending -= 1
        if self.pending == 0 and not self.all_done.done():
            self.all_done.set_result(None)


async def run_load(target: Target, load: Load) -> dict[str, Any]:
    """Drive ``load.connections`` closed loops for ``load.duration`` seconds; each finishes the request
    it has in flight, so every request the server accepted is answered and counted. Given several
    requests (one per team's key), connection ``i`` sends the ``i``-th modulo their number."""
    loop = asyncio.get_running_loop()
    connections = load.connections
    run = _Run(
        loop, load.request, 0.0, connections / load.rate if load.rate else 0.0, connections, loop.create_future()
    )
    clients = []
    for i in range(connections):
        _, client = await loop.create_connection(functools.partial(_Client, run, i), target.host, target.port)
        clients.append(client)
    started = time.monotonic()
    run.deadline = started + load.duration
    run.last = started
    for i, client in enumerate(clients):
        if run.interval:  # spread paced connections over one interval
            client.next_at = started + run.interval * i / connections - run.interval
        client.send()
    await run.all_done
    return {
        "ok": run.ok,
        "errors": run.errors,
        "seconds": max(run.last - started, 1e-9),
        "latencies": run.latencies.tobytes(),
        "first_chunk": run.first_chunk.tobytes(),
        "started": run.started.tobytes(),
        "ports": run.ports.tobytes(),
        "statuses": run.statuses,
    }


def _worker(conn: Connection) -> None:
    """A generator process: runs each command it is sent (a ``Target`` and its ``Load``) and answers
    with the result."""
    while True:
        command = conn.recv()
        if command is None:
            return
        try:
            conn.send(uvloop.run(run_load(*command)))
        except Exception as exc:  # noqa: BLE001 - reported to the orchestrator, which stops the benchmark
            conn.send({"error": f"{type(exc).__name__}: {exc}"})


class LoadGenerators:
    """``processes`` long-lived generator processes (started once: a Python start costs more than a run)."""

    def __init__(self, processes: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipes: list[Connection] = []
        self._procs = []
        for _ in range(processes):
            here, there = context.Pipe()
            proc = context.Process(target=_worker, args=(there,), daemon=True, name="bench-loadgen")
            proc.start()
            self._pipes.append(here)
            self._procs.append(proc)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs if p.pid is not None]

    def run(self, target: Target, load: Load, *, processes: int | None = None) -> Result:
        """Split the connections over ``processes`` generators (all by default, never more than
        there are connections) and merge what they measured. Several requests (one per team) are
        spread over all the connections: each generator starts where the one before left off."""
        request, connections = load.request, load.connections
        used = self._pipes[: max(1, min(processes or len(self._pipes), connections))]
        shares = [connections // len(used) + (1 if i < connections % len(used) else 0) for i in range(len(used))]
        start = 0
        for pipe, share in zip(used, shares, strict=True):
            at = start % len(request)
            mine = request if isinstance(request, bytes) else request[at:] + request[:at]
            pipe.send((target, replace(load, request=mine, connections=share, rate=load.rate * share / connections)))
            start += share
        result = Result()
        for pipe in used:
            answer = pipe.recv()
            if "error" in answer:
                raise RuntimeError(f"load generator failed: {answer['error']}")
            result.merge(answer)
        return result

    def close(self) -> None:
        for pipe in self._pipes:
            with contextlib.suppress(OSError):
                pipe.send(None)
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
