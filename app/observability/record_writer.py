"""Keeps each answered request's record in the database, off the request path, for the request lookup.

The request path pays one bounded ``deque`` append when its record is published (the record object
itself: nothing is copied or formatted there). A thread of its own wakes every ``FLUSH_SECONDS``,
turns what is waiting into rows and writes them in one transaction. If the database is slower than
the requests (or away), the queue holds at most ``capacity`` records: the oldest waiting one is
dropped for each new one and counted (``tollgate_request_records_dropped_total``), so a request never
waits for a record. A batch whose commit failed is kept and tried again (a row already written is
skipped); at shutdown what is waiting is written before the thread ends.

Only the generation endpoints' records of a known team are kept: those are what a client or an
operator looks up, and what the ledger may have charged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from app.observability import metrics
from app.observability.record import RequestRecord
from app.store.database import Database, Sql
from app.store.request_records import write_records
from domain.endpoints import ENDPOINT_PATHS, GENERATE_CONTENT

log = logging.getLogger("tollgate.records")

#: The endpoints whose requests are kept (``app/observability/access.py`` names them): every billed one.
KEPT_ENDPOINTS = frozenset({*ENDPOINT_PATHS, "messages.count_tokens", f"{GENERATE_CONTENT}.count_tokens"})
#: Seconds between two writes of what is waiting.
FLUSH_SECONDS = 0.25
#: Records written in one transaction at most.
BATCH = 1000
#: Records waiting at most: about 1 KB each, so 10 MB; at 1,000 requests/s, 20 seconds of a database outage.
CAPACITY = 20_000

#: ``(model id, deployment index) -> the name that deployment knows the model by`` ("" unknown).
DeploymentName = Callable[[str, int], str]


class RecordWriter:
    def __init__(
        self,
        database: Database,
        *,
        capacity: int = CAPACITY,
        flush_seconds: float = FLUSH_SECONDS,
        deployment_name: DeploymentName | None = None,
    ) -> None:
        self._database = database
        self._capacity = capacity
        self._flush_seconds = flush_seconds
        self._deployment_name = deployment_name
        self._queue: deque[RequestRecord] = deque()
        self._unsent: list[tuple[Any, ...]] = []  # a batch whose commit failed, tried again first
        self.dropped = 0
        self.written = 0
        self._stopped = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._run, name="tollgate-record-writer", daemon=True)

    def start(self) -> RecordWriter:
        self._thread.start()
        return self

    def keep(self, record: RequestRecord) -> None:
        """Queue a published record (the request path: no I/O, never blocks)."""
        if record.endpoint not in KEPT_ENDPOINTS or not record.team:
            return
        if len(self._queue) >= self._capacity:
            self._drop_oldest()
        self._queue.append(record)

    def _drop_oldest(self) -> None:
        try:
            self._queue.popleft()
        except IndexError:  # the writer thread took them meanwhile
            return
        self.dropped += 1
        metrics.RECORDS_DROPPED.inc()

    @property
    def waiting(self) -> int:
        return len(self._queue) + len(self._unsent)

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is waiting, then stop the thread."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        sql: Sql | None = None  # its connection belongs to this thread
        try:
            while True:
                stopping = self._stopped.wait(self._flush_seconds)
                sql = self._flush(sql)
                if stopping:
                    return
        finally:
            if sql is not None:
                sql.close()

    def _flush(self, sql: Sql | None) -> Sql | None:
        """Write every waiting record, a batch per transaction; returns the connection to use next
        (None after a failure: the next flush opens a new one)."""
        try:
            while self._unsent or self._queue:
                if not self._unsent:
                    self._unsent = self._take()
                sql = sql or Sql(self._database, rebuildable=True)
                with sql.transaction() as tx:
                    write_records(tx, self._unsent)
                self.written += len(self._unsent)
                self._unsent = []
            if self._failing:
                self._failing = False
                log.warning("request records are being written again")
            return sql
        except Exception as exc:  # noqa: BLE001 - the database away: keep the batch, try again later
            if not self._failing:
                self._failing = True
                log.warning(
                    "request records could not be written (%s); trying again, the oldest waiting "
                    "ones are dropped past %d",
                    str(exc).strip() or type(exc).__name__,
                    self._capacity,
                )
            if sql is not None:
                sql.close()
            return None

    def _take(self) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        now_wall, now = time.time(), time.perf_counter()
        while len(rows) < BATCH:
            try:
                record = self._queue.popleft()
            except IndexError:
                break
            rows.append(self.row(record, now_wall - now))
        return rows

    def row(self, record: RequestRecord, wall_offset: float) -> tuple[Any, ...]:
        """The record as a ``request_records`` row; ``wall_offset`` turns its monotonic times into Unix time."""
        upstream_model = ""
        if record.deployment is not None and self._deployment_name is not None:
            upstream_model = self._deployment_name(record.model, record.deployment)
        first_byte = record.time_to_first_byte
        return (
            record.request_id,
            record.team,
            record.key_id,
            record.model,
            record.endpoint,
            record.method,
            record.path,
            record.status or 499,
            int(record.stream),
            record.started + wall_offset,
            None if first_byte is None else round(first_byte * 1000, 3),
            round(record.latency * 1000, 3),
            record.deployment,
            upstream_model,
            record.upstream_attempts,
            ",".join(record.upstream_errors),
            record.error,
            record.charged,
        )
