"""Ledger throughput, measured: the gateway's single writer with group commit, against the naive
per-request get → command → save it replaces, in the same run, on SQLite and PostgreSQL.

A "request" is what the gateway does per API call: a hold, then a charge (two events). Also
measures rebuilding every read model from the events. Prints a table and writes JSON.

    python -m scripts.ledger_bench [--requests 3000] [--concurrency 64] [--naive-requests N] [--json results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.store.database import Database
from app.store.event_store import LedgerStore, open_ledger_store
from app.store.store_errors import VersionConflict
from domain.ledger import TeamLedger, team_id
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage
from projections.history import HistoryProjection

PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))
USAGE = TokenUsage(input_tokens=500, output_tokens=200)
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def holding(rid: str) -> Callable[[TeamLedger], object]:
    """The request's hold, as a command on its team."""
    return lambda team: team.place_hold(RequestOnLedger(rid, "k", "m", "chat"), 10_000)


def charging(rid: str) -> Callable[[TeamLedger], object]:
    """The request's charge, as a command on its team."""
    return lambda team: team.charge(RequestOnLedger(rid, "k", "m", "chat"), USAGE, PRICE, Decimal(100))


async def writer_scenario(store: LedgerStore, teams: list[str], requests: int, concurrency: int) -> dict[str, Any]:
    writer = LedgerWriter(store).start()
    latencies: list[float] = []
    counter = iter(range(requests))

    async def client() -> None:
        for i in counter:
            name = random.choice(teams)
            tid, rid = team_id(name), f"r{i}-{uuid.uuid4().hex[:8]}"
            started = time.perf_counter()
            await writer.run_on_team(tid, name, holding(rid))
            await writer.run_on_team(tid, name, charging(rid))
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    writer.stop()
    return _result(requests, elapsed, latencies)


def naive_scenario(store: LedgerStore, teams: list[str], requests: int, threads: int) -> dict[str, Any]:
    """Per request: load the team, decide, save — twice (hold, then charge), retrying on conflict.

    ``store`` should have the library's aggregate cache on (with its fast-forward read), the fair
    way to run this design; without it every load replays the team's whole history."""
    latencies: list[float] = []
    conflicts = [0]
    counter = iter(range(requests))
    lock = threading.Lock()

    def step(name: str, action: Callable[[TeamLedger], object]) -> None:
        while True:
            team = store.find_team(team_id(name))
            if team is None:
                raise RuntimeError(f"team {name!r} was never opened")
            action(team)
            try:
                store.save_teams([team])
                return
            except VersionConflict:
                with lock:
                    conflicts[0] += 1

    def client() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            name, rid = random.choice(teams), f"n{i}-{uuid.uuid4().hex[:8]}"
            started = time.perf_counter()
            step(name, holding(rid))
            step(name, charging(rid))
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    workers = [threading.Thread(target=client) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return {**_result(requests, time.perf_counter() - started, latencies), "conflicts": conflicts[0]}


def _result(requests: int, elapsed: float, latencies: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {
        "requests": requests,
        "seconds": round(elapsed, 3),
        "requests_per_s": round(requests / elapsed, 1),
        "charges_per_s": round(requests / elapsed, 1),
        "events_per_s": round(2 * requests / elapsed, 1),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 2),
    }


def fresh_database(kind: str, directory: Path) -> str | None:
    if kind == "sqlite":
        return f"sqlite:///{directory / 'bench.db'}"
    try:
        import psycopg

        with psycopg.connect(
            Database.from_url(PG_ADMIN, directory).conninfo(), autocommit=True, connect_timeout=3
        ) as c:
            name = "tg_bench_" + uuid.uuid4().hex[:8]
            c.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://postgres@127.0.0.1:5432/{name}"
    except Exception as exc:  # noqa: BLE001 - any failure to reach PostgreSQL skips its half of the benchmark
        print(f"PostgreSQL unavailable, skipping it: {exc}", file=sys.stderr)
        return None


def drop_database(url: str) -> None:
    if url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(Database.from_url(PG_ADMIN, Path()).conninfo(), autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def open_teams(store: LedgerStore, names: list[str]) -> None:
    """Open the benchmark's teams, many at a time: the writer commits what is submitted together in
    one transaction, so the setup costs a few commits, not one durable commit per team (a thousand on
    PostgreSQL took half a minute). The setup is not measured."""
    with LedgerWriter(store) as setup, ThreadPoolExecutor(max_workers=64) as pool:
        service = LedgerService(setup)
        list(pool.map(lambda name: service.create_team(name, 10**15), names))


def bench_backend(kind: str, requests: int, concurrency: int, naive_requests: int) -> dict[str, Any] | None:
    with tempfile.TemporaryDirectory() as tmp:
        url = fresh_database(kind, Path(tmp))
        if url is None:
            return None
        store = open_ledger_store(url, Path(tmp), pool_size=4)
        many = [f"team-{i}" for i in range(1000)]
        open_teams(store, ["hot", "cold", *many])
        results = {
            "writer_hot_team": asyncio.run(writer_scenario(store, ["hot"], requests, concurrency)),
            "writer_1000_teams": asyncio.run(writer_scenario(store, many, requests, concurrency)),
        }
        cached = LedgerStore(
            env={**store.database.eventsourcing_env(9, create_tables=False), "AGGREGATE_CACHE_MAXSIZE": "1000"}
        )
        results["naive_hot_team_1_thread"] = naive_scenario(cached, ["cold"], naive_requests, 1)
        results["naive_hot_team_8_threads"] = naive_scenario(cached, ["cold"], naive_requests, 8)
        cached.close()
        events = store.recorder.max_notification_id() or 0
        history = HistoryProjection(store, store.database)
        started = time.perf_counter()
        history.rebuild()
        elapsed = time.perf_counter() - started
        history.close()
        results["rebuild"] = {
            "events": events,
            "seconds": round(elapsed, 3),
            "events_per_s": round(events / elapsed, 1),
        }
        store.close()
        drop_database(url)
        return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--naive-requests",
        type=int,
        default=None,
        help="requests of each naive scenario (default: a sixth of --requests, at least 200); "
        "eight naive threads on one team retry conflicts for most of a minute at 200",
    )
    args = parser.parse_args(argv)
    naive_requests = args.naive_requests or max(args.requests // 6, 200)
    report: dict[str, Any] = {"requests": args.requests, "concurrency": args.concurrency, "backends": {}}
    for kind in args.backends.split(","):
        print(f"benchmarking the {kind} ledger…", file=sys.stderr, flush=True)
        results = bench_backend(kind, args.requests, args.concurrency, naive_requests)
        if results is not None:
            report["backends"][kind] = results
    print(f"{'backend':<11} {'scenario':<26} {'req/s':>9} {'events/s':>9} {'p50 ms':>8} {'p99 ms':>8}  notes")
    for kind, results in report["backends"].items():
        naive = results["naive_hot_team_1_thread"]["requests_per_s"]
        for name, r in results.items():
            if name == "rebuild":
                print(
                    f"{kind:<11} {'rebuild all read models':<26} {'':>9} {r['events_per_s']:>9} {'':>8} {'':>8}  "
                    f"{r['events']} events in {r['seconds']} s"
                )
                continue
            note = (
                f"{r['requests_per_s'] / naive:.1f}x the naive 1-thread baseline"
                if name.startswith("writer")
                else (f"{r['conflicts']} write conflicts" if r.get("conflicts") else "")
            )
            print(
                f"{kind:<11} {name:<26} {r['requests_per_s']:>9} {r['events_per_s']:>9} {r['p50_ms']:>8} "
                f"{r['p99_ms']:>8}  {note}"
            )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
