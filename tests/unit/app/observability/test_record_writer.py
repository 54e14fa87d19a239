"""The request records' writer (``app/observability/record_writer.py``): the request path only queues,
the queue never grows past its bound (the oldest records go, counted), everything queued is written
in batches — at shutdown too — a batch the database refused is written once it takes it again, and
the sweeper's purge removes what is older than the retention."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.observability import record_writer
from app.observability.record import RequestRecord
from app.observability.record_writer import RecordWriter
from app.store.database import Database, Sql
from app.store.event_store import LedgerStore, open_ledger_store
from app.store.request_records import find_record, purge_old_records
from tests.support.backend import new_database_url


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LedgerStore]:
    opened = open_ledger_store(new_database_url(), tmp_path, pool_size=1)
    yield opened
    opened.close()


def answered(
    request_id: str,
    *,
    endpoint: str = "chat.completions",
    team: str = "acme",
    status: int = 200,
    charged: int | None = 1234,
) -> RequestRecord:
    record = RequestRecord("POST", "/v1/chat/completions", endpoint, lambda r: None, request_id=request_id)
    record.team, record.key_id, record.model, record.status, record.charged = team, "key_1", "fake-gpt", status, charged
    record.upstream_attempts, record.deployment = 2, 1
    record.upstream_errors.append("overloaded")
    record.first_byte = record.started + 0.010
    record.finished_at = record.started + 0.025
    return record


def rows(database: Database) -> dict[str, dict[str, Any]]:
    sql = Sql(database)
    try:
        return {r["request_id"]: r for r in sql.query("SELECT * FROM request_records")}
    finally:
        sql.close()


def wait_for(condition: Any) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "not written in time"
        time.sleep(0.01)


def test_only_the_generation_endpoints_of_a_known_team_are_queued(store: LedgerStore):
    writer = RecordWriter(store.database)  # not started: nothing is written, the queue is what is seen
    writer.keep(answered("r1"))
    writer.keep(answered("r2", endpoint="models"))
    writer.keep(answered("r3", team=""))  # refused before a key was read
    writer.keep(answered("r4", endpoint="messages.count_tokens"))
    assert writer.waiting == 2


def test_a_full_queue_drops_its_oldest_records_and_counts_them(store: LedgerStore):
    writer = RecordWriter(store.database, capacity=3, flush_seconds=0.01)
    for n in range(5):
        writer.keep(answered(f"r{n}"))
    assert (writer.waiting, writer.dropped) == (3, 2)
    writer.start()
    writer.stop()
    assert set(rows(store.database)) == {"r2", "r3", "r4"}


def test_everything_queued_is_written_in_batches_and_at_shutdown(store: LedgerStore, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(record_writer, "BATCH", 4)
    writer = RecordWriter(
        store.database,
        flush_seconds=3600,  # never by the clock: only the shutdown writes
        deployment_name=lambda model, index: f"{model}-deployment-{index}",
    )
    for n in range(10):
        writer.keep(answered(f"r{n}"))
    writer.start()
    writer.stop()
    written = rows(store.database)
    assert (len(written), writer.written, writer.waiting) == (10, 10, 0)
    row = written["r0"]
    assert (row["team_name"], row["key_id"], row["model"], row["status"], row["charged"]) == (
        "acme",
        "key_1",
        "fake-gpt",
        200,
        1234,
    )
    assert (row["deployment"], row["upstream_model"], row["attempts"], row["upstream_errors"]) == (
        1,
        "fake-gpt-deployment-1",
        2,
        "overloaded",
    )
    assert (row["first_byte_ms"], row["duration_ms"]) == pytest.approx((10.0, 25.0))
    assert abs(row["started_at"] - time.time()) < 60


def test_a_request_id_recorded_again_keeps_its_first_record(store: LedgerStore):
    """An Idempotency-Key's replay answers under its original request's id: the original's record stands."""
    writer = RecordWriter(store.database, flush_seconds=0.01).start()
    writer.keep(answered("r1", status=200))
    wait_for(lambda: writer.written == 1)
    writer.keep(answered("r1", status=201, charged=None))
    writer.stop()
    assert rows(store.database)["r1"]["status"] == 200


def test_records_the_database_refused_are_written_once_it_takes_them(tmp_path: Path):
    url = new_database_url("later.db", empty=True)
    database = Database.from_url(url, tmp_path)
    writer = RecordWriter(database, flush_seconds=0.01).start()  # no table yet: every write fails
    try:
        writer.keep(answered("r1"))
        time.sleep(0.1)
        assert (writer.waiting, writer.written) == (1, 0)
        open_ledger_store(url, tmp_path).close()  # the schema is created
        wait_for(lambda: writer.written == 1)
    finally:
        writer.stop()
    assert set(rows(database)) == {"r1"}


def test_the_purge_removes_the_records_older_than_the_retention(store: LedgerStore):
    writer = RecordWriter(store.database, flush_seconds=3600).start()
    old = answered("old")
    old.started -= 2 * 86400  # arrived two days ago
    old.finished_at = old.started + 1
    writer.keep(old)
    writer.keep(answered("new"))
    writer.stop()
    assert purge_old_records(store.database, time.time() - 86400) == 1
    sql = Sql(store.database)
    try:
        assert find_record(sql, "old") is None
        assert find_record(sql, "new", "acme") is not None
        assert find_record(sql, "new", "another-team") is None
    finally:
        sql.close()
