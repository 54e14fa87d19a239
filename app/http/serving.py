"""``tollgate serve``: one gateway process, or ``--workers N`` of them behind one port.

Python runs one request at a time per process, so a gateway that must use several cores runs
several processes. Each worker is a whole gateway — its own runtime (``build_runtime``): ledger
writer, key cache, credit leases, projector — built in the worker from the configuration file
named by ``TOLLGATE_CONFIG``, as uvicorn's workers need an import string, not an object. Several
processes on one ledger are safe (the event store's optimistic concurrency; each registers itself),
but rate limits kept in one process's memory would admit N times the limit: ``--workers`` above 1
requires ``redis_url``, and says so before anything starts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any, Literal, TypedDict, cast

from app.observability.logs import configure_logging
from app.ratelimit.choice import StartupRefused
from app.settings_file import CONFIG_ENV, load_settings
from domain.settings import ConfigError, Settings

#: The exit code with which a worker that cannot start tells uvicorn's supervisor to stop (not restart it).
WORKER_STARTUP_FAILURE = 3


def serve(
    settings: Settings, base_dir: Path, host: str, port: int, workers: int = 1, config_path: str | None = None
) -> None:
    import uvicorn

    if workers > 1:
        _serve_workers(settings, base_dir, host, port, workers, config_path)
        return

    _build_tokenizer_first()
    from app.http.server import create_asgi_app
    from app.runtime import build_runtime

    configure_logging(settings.log_format, settings.log_level)
    runtime = build_runtime(settings, base_dir)
    print(f"Tollgate: serving {len(settings.models)} model(s) on http://{host}:{port}/v1", flush=True)
    # uvicorn re-raises the signal that stopped it once it is done, to the handler it found: make
    # that a no-op for SIGTERM, so that a gateway that stopped cleanly exits 0, as orchestrators expect.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    uvicorn.run(create_asgi_app(runtime), host=host, port=port, **_uvicorn_options(settings))


def _build_tokenizer_first() -> None:
    """Build the tokenizer before the server's modules are imported and its runtime built. Building
    it reads its 200,000 ranks into a Python dict that the encoder copies and that is then dropped
    (about 30 MB for a moment): built first, the memory it gave back is what the imports and the
    runtime take next, so a process's peak RSS is its working size (116 MB after the imports,
    against 146 MB when it was built last, at start-up, by ``warm_up``)."""
    from app.tokens.encoding import o200k

    o200k()


class UvicornOptions(TypedDict):
    """The options ``serve`` gives uvicorn, the same with and without ``--workers``."""

    log_config: None
    log_level: str
    access_log: bool
    timeout_graceful_shutdown: Any  # seconds: uvicorn's annotation says int; it waits any number of them
    http: type[asyncio.Protocol]
    ws: Literal["none"]


def _uvicorn_options(settings: Settings) -> UvicornOptions:
    """uvicorn writes its few warnings through our logging (``log_config=None``), logs no access
    lines of its own (ours carry the team and the cost), and on SIGTERM gives the requests and
    streams in flight ``shutdown_timeout`` seconds to finish. Its HTTP protocol is httptools' with
    the limits uvicorn lacks (``app/http/protocol.py``; a ``partial`` pickles, for ``--workers``);
    the gateway serves no WebSocket."""
    from app.http.protocol import ConnectionLimits, GuardedHttpToolsProtocol

    limits = ConnectionLimits(
        max_header_bytes=settings.max_header_bytes,
        max_headers=settings.max_headers,
        header_timeout=float(settings.header_timeout),
        write_timeout=float(settings.write_timeout),
    )
    return {
        "log_config": None,
        "log_level": "warning",
        "access_log": False,
        "timeout_graceful_shutdown": float(settings.shutdown_timeout),
        # uvicorn calls the partial as it would the class
        "http": cast(type[asyncio.Protocol], partial(GuardedHttpToolsProtocol, limits=limits)),
        "ws": "none",
    }


def _serve_workers(
    settings: Settings, base_dir: Path, host: str, port: int, workers: int, config_path: str | None
) -> None:
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from app.ratelimit.redis_store import reachable
    from app.store.event_store import open_ledger_store

    if settings.redis_url is None:
        raise StartupRefused(
            f"--workers {workers} runs {workers} gateway processes on one ledger, and rate limits kept in one "
            'process\'s memory would not hold across them: set redis_url (e.g. "redis://127.0.0.1:6379/0") '
            "in the configuration, or TOLLGATE_REDIS_URL"
        )
    try:
        asyncio.run(reachable(settings.redis_url))
    except Exception as exc:  # noqa: BLE001 - any failure to reach Redis refuses the start, with its reason
        raise StartupRefused(f"redis_url {settings.redis_url!r} is unreachable: {exc}") from None
    # Create and migrate the database once, here, rather than in N workers at once.
    open_ledger_store(settings.database_url, base_dir, pool_size=1).close()
    if config_path is not None:
        os.environ[CONFIG_ENV] = str(Path(config_path).resolve())  # what every worker reads
    configure_logging(settings.log_format, settings.log_level)
    from app.observability.metrics import MULTIPROCESS_DIR_ENV

    # Each worker keeps its metrics in files here, and whichever process answers a scrape sums them.
    metrics_dir = tempfile.TemporaryDirectory(prefix="tollgate-metrics-")
    os.environ[MULTIPROCESS_DIR_ENV] = metrics_dir.name
    metrics_server = None
    if settings.metrics_port is not None:
        from prometheus_client import CollectorRegistry, start_http_server
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=metrics_dir.name)
        metrics_server, _ = start_http_server(settings.metrics_port, addr=settings.metrics_host, registry=registry)

    config = uvicorn.Config(
        "app.http.serving:app_from_environment",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        **_uvicorn_options(settings),
    )
    supervisor = Multiprocess(config, sockets=[config.bind_socket()])
    print(
        f"Tollgate: serving {len(settings.models)} model(s) on http://{host}:{port}/v1 with {workers} worker processes",
        flush=True,
    )
    try:
        supervisor.run()  # until SIGTERM or SIGINT, which it passes on to every worker, then joins them
    finally:
        if metrics_server is not None:
            metrics_server.shutdown()
        metrics_dir.cleanup()
    if any(p.process.exitcode == WORKER_STARTUP_FAILURE for p in supervisor.processes):
        raise StartupRefused("a worker process could not start (its error is above); every worker was stopped")


def app_from_environment() -> object:
    """The application of one worker process (uvicorn's factory): its own runtime, from ``TOLLGATE_CONFIG``.

    uvicorn calls this inside its running event loop; building the runtime runs event loops of its
    own (checking that Redis answers), so it is built in a thread, as ``serve`` builds it before
    any loop runs."""
    from concurrent.futures import ThreadPoolExecutor

    _build_tokenizer_first()
    from app.http.server import create_asgi_app
    from app.runtime import build_runtime

    try:
        settings, base = load_settings(None)
        configure_logging(settings.log_format, settings.log_level)
        with ThreadPoolExecutor(1) as pool:
            runtime = pool.submit(build_runtime, settings, base).result()
    except (ConfigError, StartupRefused) as exc:
        print(f"tollgate: error: {exc}", file=sys.stderr, flush=True)
        sys.exit(WORKER_STARTUP_FAILURE)
    return create_asgi_app(runtime)
