"""The benchmark's requests: ``tollgate serve`` on the built ledger, in front of the fast fake
upstream, and one client per team sending chat completions one at a time over a kept-alive
connection (``http.client``: the same small client cost for every team, so ratios are fair).

Every scenario starts a fresh gateway process — a restart — and says what its requests saw.
"""

from __future__ import annotations

import http.client
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.bench import servers
from scripts.bench.procstat import rss_mb
from scripts.bench.report import percentile
from scripts.ledger_scale.ledger import MODEL, Ledger, Team

START_ATTEMPTS = 3
BODY = (
    b'{"model":"' + MODEL.encode() + b'","max_tokens":64,"messages":[{"role":"user","content":'
    b'"Why do toll roads keep a ledger of every car that passes through?"}]}'
)


class Client:
    """One team's client: requests one after the other on one connection."""

    def __init__(self, port: int, team: Team) -> None:
        self._headers = {"authorization": f"Bearer {team.key}", "content-type": "application/json"}
        self._conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)

    def chat(self) -> float:
        """One chat completion (connecting first if need be); its latency in ms."""
        started = time.perf_counter()
        self._conn.request("POST", "/v1/chat/completions", BODY, self._headers)
        answer = self._conn.getresponse()
        body = answer.read()
        elapsed = (time.perf_counter() - started) * 1e3
        if answer.status != 200 or b'"cost"' not in body:
            raise RuntimeError(f"the gateway answered {answer.status}: {body[:300]!r}")
        return elapsed

    def close(self) -> None:
        self._conn.close()


def summary(latencies: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {
        "requests": len(ordered),
        "p50_ms": statistics.median(ordered) if ordered else None,
        "p99_ms": percentile(ordered, 0.99) if ordered else None,
        "max_ms": ordered[-1] if ordered else None,
    }


class Gateway:
    """``tollgate serve`` on the ledger; each ``restarted()`` block is a fresh process."""

    def __init__(self, ledger: Ledger, workdir: Path) -> None:
        self.ledger = ledger
        self.log = workdir / f"tollgate-{ledger.backend}.log"
        self.started_at = 0.0  # perf_counter when the last process was started
        self.ready_s = 0.0  # from its start until it first answered

    @contextmanager
    def restarted(self) -> Iterator[servers.Server]:
        port = servers.free_port()
        server = servers.Server(
            "tollgate",
            [*servers.tollgate_command(), "serve", "--config", str(self.ledger.config), "--port", str(port)],
            port,
            self.log,
        )
        for attempt in range(START_ATTEMPTS):
            self.started_at = time.perf_counter()
            try:
                server.start(timeout=600)
                break
            except RuntimeError as exc:
                # A PostgreSQL server shared with other work may have no connection slot free for a moment.
                if "too many clients" not in str(exc) or attempt == START_ATTEMPTS - 1:
                    raise
                time.sleep(10)
        self.ready_s = time.perf_counter() - self.started_at
        try:
            yield server
        finally:
            server.stop()


def rss(server: servers.Server) -> float:
    """The gateway process's resident set now, in MB."""
    return rss_mb([server.pid]).get(server.pid, 0.0)


def first_request(server: servers.Server, team: Team) -> float:
    """The team's first request to a gateway that has just started (a new connection): ms."""
    client = Client(server.port, team)
    try:
        return client.chat()
    finally:
        client.close()


def steady(server: servers.Server, teams: list[Team], requests: int, warmup: int) -> dict[str, dict[str, Any]]:
    """Each team's latencies over ``requests`` sequential requests after ``warmup`` ones, the teams'
    requests alternating (whatever else the machine does then hits all of them alike)."""
    clients = [Client(server.port, team) for team in teams]
    latencies: list[list[float]] = [[] for _ in teams]
    try:
        for i in range(warmup + requests):
            for client, measured in zip(clients, latencies, strict=True):
                ms = client.chat()
                if i >= warmup:
                    measured.append(ms)
    finally:
        for client in clients:
            client.close()
    return {team.name: summary(measured) for team, measured in zip(teams, latencies, strict=True)}


def alongside(server: servers.Server, big: Team, small: Team) -> dict[str, Any]:
    """The big team's first request, and at the same moment the small team's requests, one after
    the other until the big team's is answered: how long the small team waited meanwhile."""
    answered = threading.Event()
    big_ms: list[float] = []
    failed: list[BaseException] = []

    def big_request() -> None:
        try:
            big_ms.append(first_request(server, big))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which raises it
            failed.append(exc)
        finally:
            answered.set()

    client = Client(server.port, small)
    thread = threading.Thread(target=big_request, name="big-team-first-request")
    try:
        thread.start()
        latencies = [client.chat()]
        while not answered.is_set():
            latencies.append(client.chat())
    finally:
        thread.join()
        client.close()
    if failed:
        raise failed[0]
    return {
        "big_first_ms": big_ms[0],
        "small_first_ms": latencies[0],
        "small": summary(latencies),
        "gateway_rss_mb": rss(server),
    }


@dataclass(frozen=True, slots=True)
class CatchUp:
    """The audit history's catch-up to wait for: how to read its ``position``, the ``target`` it must
    reach, the ``perf_counter`` its time is counted from (the gateway's start), and how long it may
    take at most (``timeout`` seconds)."""

    position: Callable[[], int]
    target: int
    started_at: float
    timeout: float = 3600


def during_catch_up(server: servers.Server, small: Team, catch_up: CatchUp, after_requests: int) -> dict[str, Any]:
    """The small team's requests, one after the other, while the audit history catches up to
    ``catch_up.target``; then ``after_requests`` more once it has, on the same gateway (the steady figure)."""
    position, target, started_at, timeout = catch_up.position, catch_up.target, catch_up.started_at, catch_up.timeout
    client = Client(server.port, small)
    during: list[float] = []
    try:
        checked, behind = 0.0, position() < target
        while behind:
            during.append(client.chat())
            if time.perf_counter() - checked >= 0.05:
                checked = time.perf_counter()
                behind = position() < target
                if checked - started_at > timeout:
                    raise RuntimeError(f"the audit history did not catch up within {timeout:.0f} s")
        caught_up_s = time.perf_counter() - started_at
        after = [client.chat() for _ in range(after_requests)]
    finally:
        client.close()
    return {"during": summary(during), "after": summary(after), "caught_up_s": caught_up_s}
