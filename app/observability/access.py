"""The outermost ASGI layer: a request id on every answer, and each request observed once.

It wraps everything uvicorn serves — the generation fast path, Litestar's routes, unknown paths —
so that every response carries ``x-request-id`` and every request is counted and logged, whatever
answered it. It only watches the messages go by (the status, the first body byte); it never buffers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from app.observability import metrics, timeline
from app.observability.record import RequestRecord
from domain.endpoints import ENDPOINT_PATHS, GENERATE_CONTENT, gemini_call
from domain.money import format_credits

access_log = logging.getLogger("tollgate.access")

#: Endpoint labels by path: a fixed set, whatever paths clients try (every billed endpoint by its
#: name, ``domain/endpoints.py``).
_ENDPOINTS = {
    **{path: name for name, path in ENDPOINT_PATHS.items()},
    "/v1/messages/count_tokens": "messages.count_tokens",
    "/v1/images/generations": "images.generations",
    "/v1/images/edits": "images.edits",
    "/v1/models": "models",
    "/metrics": "metrics",
}
_PREFIXES = (
    ("/admin", "admin"),
    ("/dashboard", "dashboard"),
    ("/health", "health"),
    ("/schema", "schema"),
    ("/v1/models/", "models"),
    ("/v1beta/models", "models"),
)
#: A Gemini method's label (its model is in the path).
GEMINI_COUNT_TOKENS = f"{GENERATE_CONTENT}.count_tokens"
#: Probes and scrapes come every few seconds: counted, but logged only at debug level.
_QUIET = {"health", "metrics"}


def endpoint_of(path: str) -> str:
    endpoint = _ENDPOINTS.get(path)
    if endpoint is not None:
        return endpoint
    gemini = gemini_call(path) if "models/" in path else None
    if gemini is not None:
        return GEMINI_COUNT_TOKENS if gemini[1] == "countTokens" else GENERATE_CONTENT
    for prefix, name in _PREFIXES:
        if path.startswith(prefix):
            return name
    return "other"


class Observed:
    """``keep``: also called with each published record (the request lookup's writer queues it)."""

    def __init__(
        self, app: Callable[..., Awaitable[None]], keep: Callable[[RequestRecord], None] | None = None
    ) -> None:
        self.app = app
        self._publish = publish if keep is None else _and(keep)

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        record = RequestRecord(scope["method"], scope["path"], endpoint_of(scope["path"]), self._publish)

        async def observed(message: Any) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                record.status = message["status"]
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", record.request_id.encode())]
            elif kind == "http.response.body" and record.first_byte is None and message.get("body"):
                record.first_byte = time.perf_counter()
            await send(message)

        token = record.enter()
        try:
            await self.app(scope, receive, observed)
        except BaseException:
            if not record.status:
                record.status = 500
            raise
        finally:
            record.leave(token)
            record.finished()
            if timeline.on:
                timeline.request(
                    record.started, record.finished_at, scope.get("client"), record.status, record.request_id
                )


def _and(keep: Callable[[RequestRecord], None]) -> Callable[[RequestRecord], None]:
    def publish_and_keep(record: RequestRecord) -> None:
        publish(record)
        keep(record)

    return publish_and_keep


#: The metrics' labelled children, by their labels: ``labels()`` takes a lock and builds a key on
#: every call; the label sets here are few and fixed (endpoints × configured models × statuses).
_children: dict[tuple[Any, ...], Any] = {}


def _child(metric: Any, *labels: str) -> Any:
    key = (metric, *labels)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*labels)
    return child


def publish(record: RequestRecord) -> None:
    """Count the request in the metrics and write its log line."""
    endpoint, model, status = record.endpoint, record.model, record.status or 499
    _child(metrics.REQUESTS, endpoint, model, str(status)).inc()
    _child(metrics.DURATION, endpoint, model).observe(record.latency)
    ttfb = record.time_to_first_byte if record.stream_opened else None
    if ttfb is not None:
        _child(metrics.FIRST_TOKEN, endpoint, model).observe(ttfb)
    for kind in record.upstream_errors:
        _child(metrics.UPSTREAM_ERRORS, model, kind).inc()
    usage = record.usage
    if usage is not None:
        for kind, count in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_write", usage.cache_write_tokens),
            ("cache_hit", usage.cache_hit_tokens),
        ):
            if count:
                _child(metrics.TOKENS, model, kind).inc(count)
    if record.charged:
        _child(metrics.CREDITS, model).inc(record.charged / 1_000_000)  # a gauge of money, not the ledger
    level = logging.DEBUG if endpoint in _QUIET else logging.INFO
    if access_log.isEnabledFor(level):
        access_log.log(level, "%s %s %d", record.method, record.path, status, extra={"request": fields(record, ttfb)})


def fields(record: RequestRecord, ttfb: float | None) -> dict[str, Any]:
    """The request's log line, less the time, level and message every line has."""
    usage = record.usage
    return {
        "request_id": record.request_id,
        "method": record.method,
        "path": record.path,
        "endpoint": record.endpoint,
        "status": record.status or 499,
        "team": record.team or None,
        "key_id": record.key_id or None,
        "model": record.model or None,
        "stream": record.stream,
        "tokens": None
        if usage is None
        else {
            "input": usage.input_tokens,
            "output": usage.output_tokens,
            "cache_write": usage.cache_write_tokens,
            "cache_hit": usage.cache_hit_tokens,
        },
        "cost_credits": None if record.charged is None else format_credits(record.charged),
        "latency_ms": round(record.latency * 1000, 3),
        "ttft_ms": None if ttfb is None else round(ttfb * 1000, 3),
        "upstream": None
        if not record.upstream_attempts
        else {
            "attempts": record.upstream_attempts,
            "deployment": record.deployment,
            "errors": record.upstream_errors or None,
        },
        "error": record.error,
        "dropped_tools": record.dropped_tools or None,
    }
