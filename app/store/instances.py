"""The gateway processes serving one database, each announcing itself every few seconds.

Two things hang on this registry. A process keeps rate limits in its own memory only while it is
the sole gateway on its database (``app/ratelimit/choice.py``). And every hold and credit lease
names the process that placed it: when a process falls silent (killed, its host gone), another one
— or the next to start — charges its streams for what they had delivered, as its last heartbeat
reported, and releases the rest (``app/ledger/sweeper.py``). So a crash frees a team's money in
seconds, not after ``hold_timeout``.

Silence is judged only by a process that has itself been heard for that long: after the database
was down, every process's last beat is old, and none may take the others for dead before they
had a chance to beat again. A process on the same host whose pid is gone is dead at once. A live
process whose row was removed (it was stuck, and taken for dead) registers again under a new id.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from app.store.database import Database, Sql

log = logging.getLogger("tollgate.instances")

HEARTBEAT_SECONDS = 3.0
SILENT_AFTER_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Peer:
    host: str
    pid: int
    shared_limits: bool


@dataclass(frozen=True, slots=True)
class StreamReport:
    """A stream in flight, as its process reported it with its heartbeat."""

    request_id: str
    team_id: str  # hex
    team_name: str
    key_id: str
    model: str
    endpoint: str
    lease: str
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_hit_tokens: int
    tags: str = ""  # its attribution tags, canonical text (``domain/attribution.py``: ``tags_text``)
    end_user: str = ""
    price_key: str = ""  # the price key of the deployment serving it ("": the model's price)


_STREAM_COLUMNS = (
    "request_id",
    "team_id",
    "team_name",
    "key_id",
    "model",
    "endpoint",
    "lease",
    "input_tokens",
    "output_tokens",
    "cache_write_tokens",
    "cache_hit_tokens",
    "tags",
    "end_user",
    "price_key",
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class InstanceRegistry:
    def __init__(self, database: Database, shared_limits: bool) -> None:
        self._database = database
        self._sql: Sql | None = Sql(database, any_thread=True)
        self._id = uuid.uuid4().hex
        self._host = socket.gethostname()
        self._shared = shared_limits
        self._stop = threading.Event()
        self._wake = threading.Event()  # set to beat now (``beat_soon``), or to stop
        self._thread = threading.Thread(target=self._beat, name="tollgate-instances", daemon=True)
        self._lock = threading.Lock()  # the connection is used by the heartbeat thread and by others
        self._heard_since: float | None = None  # since when every beat got through
        #: When the last beat that got through ended (monotonic), or the registration: the others
        #: take this process for dead only after ``instance_dead_after`` seconds without one.
        self._last_heard = time.monotonic()
        #: What this process's streams have delivered, asked for at every beat (None: nothing to report).
        self.stream_reports: Callable[[], Sequence[StreamReport] | None] | None = None
        #: Called (on the heartbeat thread) when this process finds it was taken for dead.
        self.on_reregistered: Callable[[], None] | None = None

    @property
    def instance_id(self) -> str:
        return self._id

    @contextmanager
    def _connection(self) -> Iterator[Sql]:
        """The registry's connection, under its lock; one that failed is dropped, and the next use
        opens a new one (the database may have restarted)."""
        with self._lock:
            if self._sql is None:
                self._sql = Sql(self._database, any_thread=True)
            try:
                yield self._sql
            except BaseException:
                with suppress(Exception):
                    self._sql.close()
                self._sql = None
                raise

    def ledger_identity(self) -> str:
        with self._connection() as sql:
            return str(sql.query("SELECT id FROM ledger_identity")[0]["id"])

    def register(self) -> list[Peer]:
        """Announce this process; returns the other live gateways on the database."""
        self._insert()
        self._last_heard = time.monotonic()
        self._thread.start()
        return self.peers()

    def _insert(self) -> None:
        now = time.time()
        with self._connection() as sql, sql.transaction() as tx:
            tx.execute(
                "INSERT INTO gateway_instances (instance_id, host, pid, shared_limits, started_at, last_seen) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (self._id, self._host, os.getpid(), int(self._shared), now, now),
            )
        self._heard_since = now

    def peers(self) -> list[Peer]:
        """The other gateways heard from lately (a dead one on this host is left out at once)."""
        with self._connection() as sql:
            rows = sql.query(
                "SELECT instance_id, host, pid, shared_limits FROM gateway_instances "
                "WHERE instance_id <> ? AND last_seen > ?",
                (self._id, time.time() - SILENT_AFTER_SECONDS),
            )
        return [
            Peer(r["host"], int(r["pid"]), bool(r["shared_limits"]))
            for r in rows
            if not (r["host"] == self._host and not _alive(int(r["pid"])))
        ]

    # -- the heartbeat ---------------------------------------------------------------------------

    def _beat(self) -> None:
        while True:
            self._wake.wait(HEARTBEAT_SECONDS)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.beat()
            except Exception as exc:  # noqa: BLE001 - the database is briefly unreachable: the next beat tries again
                self._heard_since = None
                log.debug("heartbeat failed: %s", exc)

    def beat_soon(self) -> None:
        """Beat now rather than at the next period: the database is back after a silence, and until a
        beat gets through the process serves nothing billed (``heard_within``). A beat under way, or
        one stuck reaching the database, is not hurried."""
        self._wake.set()

    def heard_within(self, seconds: float) -> bool:
        """Whether a heartbeat of this process got through within ``seconds``. Silent for
        ``instance_dead_after``, it may have been taken for dead and its leases released by the
        others; until a beat gets through and says so (re-registering it, its lease book forgotten
        first), what the book holds cannot be vouched for, and no request is held against it."""
        return time.monotonic() - self._last_heard < seconds

    def beat(self) -> None:
        streams = self.stream_reports() if self.stream_reports is not None else None
        with self._connection() as sql, sql.transaction() as tx:
            found = tx.execute(
                "UPDATE gateway_instances SET last_seen = ? WHERE instance_id = ?", (time.time(), self._id)
            )
            if found and streams is not None:
                tx.execute("DELETE FROM inflight_streams WHERE instance_id = ?", (self._id,))
                tx.executemany(
                    f"INSERT INTO inflight_streams (instance_id, {', '.join(_STREAM_COLUMNS)}, updated_at) "
                    f"VALUES ({', '.join('?' * (len(_STREAM_COLUMNS) + 2))})",
                    [(self._id, *(getattr(s, c) for c in _STREAM_COLUMNS), time.time()) for s in streams],
                )
        if not found:
            old, self._id = self._id, uuid.uuid4().hex
            log.error(
                "this gateway process (instance %s) was taken for dead after a silence, and its holds and "
                "leases were released; it carries on as instance %s",
                old,
                self._id,
            )
            self._insert()
            if self.on_reregistered is not None:
                self.on_reregistered()  # returns once the lease book is forgotten
        elif self._heard_since is None:
            self._heard_since = time.time()
        self._last_heard = time.monotonic()

    # -- the dead ----------------------------------------------------------------------------------

    def dead_instances(self, dead_after: float) -> list[str]:
        """The processes to take for dead: silent for ``dead_after`` seconds (judged only once this
        process has itself been heard that long), or on this host with their pid gone."""
        now = time.time()
        heard = self._heard_since is not None and now - self._heard_since >= dead_after
        with self._connection() as sql:
            rows = sql.query(
                "SELECT instance_id, host, pid, last_seen FROM gateway_instances WHERE instance_id <> ?", (self._id,)
            )
        return [
            r["instance_id"]
            for r in rows
            if (heard and float(r["last_seen"]) < now - dead_after)
            or (r["host"] == self._host and not _alive(int(r["pid"])))
        ]

    def abandoned_streams(self, instance_ids: Sequence[str]) -> list[StreamReport]:
        if not instance_ids:
            return []
        marks = ", ".join("?" * len(instance_ids))
        with self._connection() as sql:
            rows = sql.query(
                f"SELECT {', '.join(_STREAM_COLUMNS)} FROM inflight_streams WHERE instance_id IN ({marks})",
                tuple(instance_ids),
            )
        return [StreamReport(**{c: r[c] for c in _STREAM_COLUMNS}) for r in rows]

    def forget(self, instance_ids: Sequence[str]) -> None:
        """The dead processes' holds are settled: remove them from the registry."""
        with self._connection() as sql, sql.transaction() as tx:
            tx.executemany("DELETE FROM inflight_streams WHERE instance_id = ?", [(i,) for i in instance_ids])
            tx.executemany("DELETE FROM gateway_instances WHERE instance_id = ?", [(i,) for i in instance_ids])

    def stop(self) -> None:
        """Stopping cleanly: this process's row stays, marked silent, with its last stream reports,
        so that whatever it still holds (a charge the ledger could not record) is settled by the next
        process to look; a stream it did charge is not charged again (the store refuses)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        try:
            with self._connection() as sql, sql.transaction() as tx:
                tx.execute("UPDATE gateway_instances SET last_seen = 0 WHERE instance_id = ?", (self._id,))
        except Exception:  # noqa: BLE001 - best effort on the way out: peers tell a dead process by its silence anyway
            pass
        with self._lock:
            if self._sql is not None:
                self._sql.close()
                self._sql = None
