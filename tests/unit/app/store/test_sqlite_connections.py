"""The SQLite connections the ledger writes on: flushed commits for the ledger, whose checkpoints
are left to the projector; unflushed commits for the rebuildable audit history."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from app.store.database import Database, Sql
from app.store.event_store import open_ledger_store
from app.store.sqlite_store import CACHED_STATEMENTS, LEDGER_AUTOCHECKPOINT
from projections.history import HistoryProjection
from tests.support.backend import BACKEND

pytestmark = pytest.mark.skipif(BACKEND != "sqlite", reason="SQLite's own connection settings")


def test_the_ledgers_connections_flush_every_commit_and_leave_checkpoints_to_the_projector(tmp_path):
    store = open_ledger_store("sqlite:///ledger.db", tmp_path, pool_size=2)
    try:
        with store.recorder.datastore.transaction(commit=False) as cursor:  # type: ignore[attr-defined]
            cursor.execute("PRAGMA wal_autocheckpoint")
            assert cursor.fetchone()[0] == LEDGER_AUTOCHECKPOINT
            cursor.execute("PRAGMA synchronous")
            assert cursor.fetchone()[0] == 2  # FULL: a charge is on the disk before its answer
            cursor.execute("PRAGMA journal_mode")
            assert cursor.fetchone()[0] == "wal"
        history = HistoryProjection(store, store.database)
        try:
            settings = history._sql.query("PRAGMA synchronous")[0]
            assert list(settings.values()) == [1]  # NORMAL: atomic, rebuildable, not flushed per slice
            assert history._sql.query("PRAGMA wal_autocheckpoint")[0]["wal_autocheckpoint"] == 1000
        finally:
            history.close()
    finally:
        store.close()


def test_other_connections_keep_flushing(tmp_path):
    sql = Sql(Database("sqlite", path=tmp_path / "x.db"))
    assert list(sql.query("PRAGMA synchronous")[0].values()) == [2]
    sql.close()
    assert CACHED_STATEMENTS > 1


def test_a_new_database_turns_to_wal_once_another_connections_write_transaction_ends(tmp_path):
    """SQLite refuses the switch to WAL at once while another connection holds a write lock (it
    does not wait, for fear of a deadlock); the ledger waits it out instead of failing to open.
    The request records' writer, retrying on a database whose tables are not made yet, held one."""
    other = sqlite3.connect(tmp_path / "ledger.db", isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    released = threading.Timer(0.2, lambda: other.execute("ROLLBACK"))
    released.start()
    started = time.monotonic()
    try:
        store = open_ledger_store("sqlite:///ledger.db", tmp_path, pool_size=1)
        try:
            with store.recorder.datastore.transaction(commit=False) as cursor:  # type: ignore[attr-defined]
                cursor.execute("PRAGMA journal_mode")
                assert cursor.fetchone()[0] == "wal"
        finally:
            store.close()
    finally:
        released.join()
        other.close()
    assert time.monotonic() - started >= 0.2  # it waited for the other's transaction to end
