"""The gateway's Prometheus metrics, and their exposition at ``/metrics``.

prometheus_client is the reference client: its exposition format, histogram buckets and, with
``--workers N``, its multiprocess mode (each worker writes its values to memory-mapped files in
``PROMETHEUS_MULTIPROC_DIR``, and whichever process answers a scrape sums them) are what Prometheus
expects, and not something worth writing again.

Labels take only values the gateway chose — endpoint names, configured model ids, error kinds —
never what a client sent, so a client cannot blow up the number of series.
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

disable_created_metrics()  # a `_created` series per counter doubles the scrape for nothing Prometheus uses

MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"

#: Latency buckets, in seconds: from a cached answer to a long generation.
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

REQUESTS = Counter(
    "tollgate_requests", "Requests answered, by endpoint, model and HTTP status.", ["endpoint", "model", "status"]
)
DURATION = Histogram(
    "tollgate_request_duration_seconds",
    "From the request's arrival to the last byte of its answer (a stream's whole length).",
    ["endpoint", "model"],
    buckets=_SECONDS,
)
FIRST_TOKEN = Histogram(
    "tollgate_time_to_first_token_seconds",
    "Streams: from the request's arrival to the first event sent to the client.",
    ["endpoint", "model"],
    buckets=_SECONDS,
)
TOKENS = Counter(
    "tollgate_tokens", "Tokens billed, by model and kind (input, output, cache_write, cache_hit).", ["model", "kind"]
)
CREDITS = Counter("tollgate_credits_charged", "Credits charged to teams, by model.", ["model"])
UPSTREAM_ERRORS = Counter(
    "tollgate_upstream_errors",
    "Failed upstream attempts, by model and kind (unreachable, timeout, rate_limited, "
    "overloaded, status_4xx, status_5xx, broken, stream_error).",
    ["model", "kind"],
)
OPEN_HOLDS = Gauge(
    "tollgate_open_holds",
    "Requests holding credit right now (held, not yet charged or released).",
    multiprocess_mode="livesum",
)
BATCH_SIZE = Histogram(
    "tollgate_ledger_batch_size",
    "Commands the ledger writer committed in one transaction.",
    buckets=(1, 2, 4, 8, 16, 32, 64),
)
COMMIT_SECONDS = Histogram(
    "tollgate_ledger_commit_seconds",
    "How long the ledger writer's commits take (deciding and saving a batch).",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5),
)
RATE_LIMITED = Counter(
    "tollgate_rate_limit_rejections",
    "Requests refused with 429 by a rate limit, by whose "
    "limit (key, team, process, or a client address's failed keys) and its kind (requests, tokens, "
    "streams or failed_keys).",
    ["scope", "kind"],
)
LEDGER_WRITABLE = Gauge(
    "tollgate_ledger_writable",
    "1 while the ledger can be written (requests are served), 0 while it cannot (generation endpoints answer 503).",
    multiprocess_mode="livemin",
)
PROJECTION_LAG = Gauge(
    "tollgate_projection_lag_events",
    "Events the audit history projection has not reached yet (it catches up every two seconds).",
    multiprocess_mode="livemax",
)
PROJECTION_QUARANTINED = Gauge(
    "tollgate_projection_quarantined_events",
    "Events the audit history projection set aside, unable to project them "
    "(tollgate ledger verify lists them and fails).",
    multiprocess_mode="livemax",
)
RECORDS_DROPPED = Counter(
    "tollgate_request_records_dropped",
    "Request records not kept for GET /v1/requests/{id}: the oldest waiting ones, dropped "
    "while the database could not take them as fast as requests came.",
)


def exposition() -> tuple[bytes, str]:
    """The metrics in Prometheus' text format: this process's, or every worker's summed."""
    if os.environ.get(MULTIPROCESS_DIR_ENV):
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def forget_this_process() -> None:
    """A worker that stops takes its live gauges (open holds) with it."""
    if os.environ.get(MULTIPROCESS_DIR_ENV):
        from prometheus_client.multiprocess import mark_process_dead

        mark_process_dead(os.getpid())
