"""The benchmark's options (``python -m scripts.bench``; ``tollgate bench`` runs that from the checkout)."""

from __future__ import annotations

import argparse
import os

DEFAULT_POSTGRES = os.environ.get("TOLLGATE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
DEFAULT_REDIS = os.environ.get("TOLLGATE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
CASE_NAMES = (
    "chat",
    "chat_stream",
    "messages",
    "messages_stream",
    "bedrock",
    "bedrock_stream",
    "cross",
    "gemini_cross",
    "embeddings",
)


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive numbers, got {text!r}")
    return values


def _positive(text: str) -> int:
    (value,) = _ints(text) if "," not in text else (0,)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected one positive number, got {text!r}")
    return value


def _cases(text: str) -> list[str]:
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [n for n in names if n not in CASE_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown case(s) {unknown}; choose from {', '.join(CASE_NAMES)}")
    return names


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgresql", "both"),
        default="sqlite",
        help="the ledger's database (default sqlite; postgresql gets a fresh database, dropped after)",
    )
    parser.add_argument(
        "--workers",
        type=_ints,
        default=[1],
        metavar="N[,N]",
        help="tollgate serve --workers, e.g. 1,2 runs both (the floor gets as many; >1 uses Redis)",
    )
    parser.add_argument(
        "--teams",
        type=_positive,
        default=1,
        metavar="N",
        help="Tollgate's load spread over N teams, each with its key (connection i uses team i mod N; default 1)",
    )
    parser.add_argument("--duration", type=float, default=1.5, help="seconds per run (default 1.5)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (direct, floor, tollgate) per point")
    parser.add_argument(
        "--concurrency",
        type=_ints,
        default=[1, 16, 64],
        metavar="C[,C]",
        help="closed-loop connections (default 1,16,64)",
    )
    parser.add_argument(
        "--cases",
        type=_cases,
        default=list(CASE_NAMES),
        metavar="CASE[,CASE]",
        help=f"which requests (default all: {','.join(CASE_NAMES)})",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=2.2,
        help="seconds Tollgate's CPU is still counted after a run: its audit history catches up "
        "every 2 s, work its requests caused (default 2.2)",
    )
    parser.add_argument(
        "--soak",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="then run non-streaming chat at half the peak rate this long and report RSS growth",
    )
    parser.add_argument(
        "--loadgen-processes",
        type=int,
        default=1,
        help="load generator processes (one drives the fast upstream at ~60,000 requests/s)",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="also sample the floor and Tollgate with py-spy (not a dependency) and print the top frames",
    )
    parser.add_argument("--profile-seconds", type=float, default=8.0, help="seconds of load per profile (default 8)")
    parser.add_argument(
        "--stalls",
        action="store_true",
        help="record Tollgate's timeline (GC, late event loop, writer batches, …) and explain each point's "
        "requests slower than p99 (scripts/bench/stalls.py)",
    )
    parser.add_argument(
        "--server",
        choices=("uvicorn", "granian"),
        default="uvicorn",
        help="the HTTP server under the floor and Tollgate alike (granian: the Rust ASGI server, if installed; "
        "Tollgate's own limits on headers and slow clients are uvicorn's protocol's, so granian runs without them)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the servers' logs, configs and ledgers (printed where)"
    )
    parser.add_argument("--json", metavar="PATH", help="also write every number as JSON to PATH")
    parser.add_argument(
        "--quick", action="store_true", help="tiny runs, to check the benchmark works (numbers meaningless)"
    )
    parser.add_argument(
        "--postgres-url",
        default=DEFAULT_POSTGRES,
        help="a PostgreSQL server where the benchmark may create and drop a database",
    )
    parser.add_argument("--redis-url", default=DEFAULT_REDIS, help="Redis for --workers above 1")
