"""The registry of gateway processes: heartbeats that survive a database restart, and who is dead."""

from __future__ import annotations

import time

import pytest

from app.store.database import Database
from app.store.event_store import open_ledger_store
from app.store.instances import InstanceRegistry, StreamReport
from tests.support.backend import BACKEND, new_database_url


@pytest.fixture
def database(tmp_path) -> Database:
    store = open_ledger_store(new_database_url(), tmp_path)
    store.close()
    return store.database


def test_a_heartbeat_reconnects_after_its_connection_was_cut(database):
    """After a PostgreSQL restart every old connection is dead: the next beat opens a new one, or
    the process would fall silent and be taken for dead while alive."""
    registry = InstanceRegistry(database, shared_limits=True)
    registry._insert()
    if BACKEND == "postgresql":
        import psycopg

        with psycopg.connect(database.conninfo(), autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        with pytest.raises(psycopg.OperationalError):  # the connection the beat had was cut
            registry.beat()
    registry.beat()
    assert registry.dead_instances(15) == []
    registry.stop()


def test_a_silent_process_is_dead_only_to_a_process_heard_from_as_long(database):
    silent, watcher = (InstanceRegistry(database, shared_limits=True) for _ in range(2))
    silent._insert()
    watcher._insert()
    with watcher._connection() as sql, sql.transaction() as tx:  # silent's last beat was 20 s ago
        tx.execute(
            "UPDATE gateway_instances SET last_seen = ? WHERE instance_id = ?", (time.time() - 20, silent.instance_id)
        )
    assert watcher.dead_instances(15) == []  # the watcher itself was heard from only just now
    watcher._heard_since = time.time() - 16
    assert watcher.dead_instances(15) == [silent.instance_id]
    watcher.forget([silent.instance_id])
    first_id = silent.instance_id
    silent.beat()  # it wakes, finds its row gone, and registers again
    assert silent.instance_id != first_id
    assert watcher.dead_instances(15) == []
    silent.stop()
    watcher.stop()


def test_a_stream_s_report_is_read_back_whole_once_its_process_is_dead(database):
    """What a dead process's streams had delivered, and the deployment price each is charged at."""
    dying, watcher = (InstanceRegistry(database, shared_limits=True) for _ in range(2))
    dying._insert()
    report = StreamReport(
        "req-1", "ab" * 16, "acme", "key-1", "gpt", "chat", "", 120, 40, 0, 8, "project=alpha", "alice", "gpt/eu"
    )
    dying.stream_reports = lambda: [report]
    dying.beat()
    assert watcher.abandoned_streams([dying.instance_id]) == [report]
    dying.stop()
    watcher.stop()


def test_a_process_silent_too_long_is_not_vouched_for_until_a_beat_says_whether_it_was_taken_for_dead(database):
    """The chaos suite found a process cut off from the database past the dead-process limit serving
    a request, once it could reach the database again, against a lease the others had released: its
    next heartbeat, which would have told it, had not come yet. Silent that long, it holds nothing
    until a beat gets through; a beat that finds it was taken for dead has the lease book forgotten
    (``on_reregistered``) before it vouches for the process again."""
    silent, watcher = (InstanceRegistry(database, shared_limits=True) for _ in range(2))
    silent.register()
    watcher._insert()
    assert silent.heard_within(5)
    silent._last_heard = time.monotonic() - 8  # its beats failed for 8 s (the database out of reach)
    assert not silent.heard_within(5)
    watcher.forget([silent.instance_id])  # the others took it for dead meanwhile
    vouched_while_forgetting: list[bool] = []
    silent.on_reregistered = lambda: vouched_while_forgetting.append(silent.heard_within(5))
    silent.beat()  # back in reach: it finds out, registers again, and forgets its leases first
    assert vouched_while_forgetting == [False]
    assert silent.heard_within(5)
    silent._last_heard = time.monotonic() - 8
    silent.beat()  # a beat that finds it alive vouches for it again too
    assert silent.heard_within(5)
    silent.stop()
    watcher.stop()
