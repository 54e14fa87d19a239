"""The SQLite connections the ledger writes on: flushed commits for the ledger, whose checkpoints
are left to the projector; unflushed commits for the rebuildable audit history."""

from __future__ import annotations

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
