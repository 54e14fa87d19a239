"""The gateway processes serving one database, each announcing itself every few seconds.

A process keeps rate limits in its own memory only while it is the sole gateway on its database;
this registry is how it finds out it is not (see ``app/ratelimit/choice.py``). A process that
stops cleanly removes its row; one that died is recognised by its silence, or at once by its pid
when it ran on the same host.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from projections.database import Database, Sql

HEARTBEAT_SECONDS = 3.0
SILENT_AFTER_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Peer:
    host: str
    pid: int
    shared_limits: bool


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
        self._sql = Sql(database, any_thread=True)
        self._id = uuid.uuid4().hex
        self._host = socket.gethostname()
        self._shared = shared_limits
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="tollgate-instances", daemon=True)
        self._lock = threading.Lock()  # the connection is used by the heartbeat thread and by stop()

    def ledger_identity(self) -> str:
        with self._lock:
            return str(self._sql.query("SELECT id FROM ledger_identity")[0]["id"])

    def register(self) -> list[Peer]:
        """Announce this process; returns the other live gateways on the database."""
        now = time.time()
        with self._lock, self._sql.transaction() as tx:
            tx.execute("INSERT INTO gateway_instances (instance_id, host, pid, shared_limits, started_at, last_seen) "
                       "VALUES (?, ?, ?, ?, ?, ?)", (self._id, self._host, os.getpid(), int(self._shared), now, now))
        self._thread.start()
        return self.peers()

    def peers(self) -> list[Peer]:
        with self._lock:
            rows = self._sql.query("SELECT instance_id, host, pid, shared_limits FROM gateway_instances "
                                   "WHERE instance_id <> ? AND last_seen > ?", (self._id, time.time() - SILENT_AFTER_SECONDS))
            dead = [r["instance_id"] for r in rows if r["host"] == self._host and not _alive(int(r["pid"]))]
            if dead:
                with self._sql.transaction() as tx:
                    tx.executemany("DELETE FROM gateway_instances WHERE instance_id = ?", [(d,) for d in dead])
        return [Peer(r["host"], int(r["pid"]), bool(r["shared_limits"])) for r in rows if r["instance_id"] not in dead]

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                with self._lock, self._sql.transaction() as tx:
                    tx.execute("UPDATE gateway_instances SET last_seen = ? WHERE instance_id = ?", (time.time(), self._id))
                    tx.execute("DELETE FROM gateway_instances WHERE last_seen < ?", (time.time() - 3600,))
            except Exception:  # the database is briefly unreachable: the next beat tries again
                pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        try:
            with self._lock, self._sql.transaction() as tx:
                tx.execute("DELETE FROM gateway_instances WHERE instance_id = ?", (self._id,))
        except Exception:
            pass
        self._sql.close()
