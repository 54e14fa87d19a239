"""Usage by endpoint (``usage_by_endpoint``) is the sum of the audit history's charges by team, endpoint
and day, whether projected as the events come or rebuilt; ``ledger verify`` finds a row that is not."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.store.database import Sql
from app.store.event_store import LedgerStore, open_ledger_store
from domain import clock
from domain.ledger import team_id
from domain.ledger_holds import BatchLine, RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage
from projections.audit import verify_ledger
from projections.endpoint_usage import SUMMED, rows_from_entries
from projections.history import HistoryProjection
from tests.support.backend import RawDatabase, new_database_url

PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))
CREDITS_PER_USD = Decimal(100)
#: The audit history's charges summed as ``usage_by_endpoint`` keeps them (what it must always equal).
FROM_ENTRIES = (
    "SELECT team_name, endpoint, substr(occurred_at, 1, 10), COUNT(*), SUM(input_tokens), SUM(output_tokens), "
    "SUM(cache_write_tokens), SUM(cache_hit_tokens), -SUM(amount) FROM ledger_entries WHERE kind = 'charge' "
    "GROUP BY team_name, endpoint, substr(occurred_at, 1, 10) ORDER BY 1, 2, 3"
)
ROWS = "SELECT * FROM usage_by_endpoint ORDER BY team_name, endpoint, day"


def _charge(writer: LedgerWriter, team: str, request: RequestOnLedger, usage: TokenUsage) -> None:
    tid = team_id(team)
    writer.on_team(tid, team, lambda t: t.place_hold(request, 500_000)).result()
    writer.on_team(tid, team, lambda t: t.charge(request, usage, PRICE, CREDITS_PER_USD)).result()


def _batch(writer: LedgerWriter, team: str, batch: RequestOnLedger, lines: list[BatchLine]) -> None:
    tid = team_id(team)
    writer.on_team(tid, team, lambda t: t.submit_batch(batch, 1_000_000)).result()
    for line in lines:
        writer.on_team(tid, team, lambda t, li=line: t.charge_batch_line(batch, li, PRICE, CREDITS_PER_USD)).result()
    writer.on_team(tid, team, lambda t: t.settle_batch(batch.request_id, "completed")).result()


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LedgerStore, RawDatabase]]:
    """Two teams' charges on several endpoints (a batch's lines among them), over two days."""
    url = new_database_url()
    store = open_ledger_store(url, tmp_path)
    with LedgerWriter(store) as writer:
        service = LedgerService(writer)
        service.create_team("acme", 10_000_000)
        service.create_team("beta", 10_000_000)
        _charge(writer, "acme", RequestOnLedger("r1", "k1", "m", "chat.completions"), TokenUsage(100, 50))
        _charge(writer, "acme", RequestOnLedger("r2", "k2", "e", "embeddings"), TokenUsage(400, 0))
        _charge(writer, "acme", RequestOnLedger("r3", "k1", "m", "chat.completions"), TokenUsage(10, 5, 20, 30))
        lines = [BatchLine("l1", "m", TokenUsage(7, 3)), BatchLine("l2", "m", TokenUsage(9, 1))]
        _batch(writer, "acme", RequestOnLedger("batch_1", "k1", "m", "batches"), lines)
        _charge(writer, "beta", RequestOnLedger("r4", "k9", "m", "messages"), TokenUsage(1, 1))
        monkeypatch.setattr(clock, "_offset", timedelta(days=1))  # the next charge, a day later
        _charge(writer, "acme", RequestOnLedger("r5", "k2", "m", "chat.completions"), TokenUsage(2, 2))
    yield store, RawDatabase(url, tmp_path)
    store.close()


def _caught_up(store: LedgerStore) -> None:
    with closing(HistoryProjection(store, store.database)) as history:
        history.catch_up(batch=3)  # several slices: rows of one endpoint and day added to across them


def _by_endpoint(store: LedgerStore, team: str) -> list[dict[str, Any]]:
    with closing(HistoryProjection(store, store.database)) as history:
        return [{k: int(v) if k != "endpoint" else v for k, v in r.items()} for r in history.endpoint_usage(team)]


def test_usage_by_endpoint_is_the_audit_history_s_charges_by_team_endpoint_and_day(ledger):
    store, raw = ledger
    _caught_up(store)
    rows = raw.execute(ROWS)
    assert rows == raw.execute(FROM_ENTRIES)
    assert [r[:4] for r in rows if r[0] == "acme"] == [
        ("acme", "batches", rows[0][2], 2),  # the batch's lines, under the endpoint they were charged on
        ("acme", "chat.completions", rows[0][2], 2),
        ("acme", "chat.completions", rows[2][2], 1),  # the day after
        ("acme", "embeddings", rows[0][2], 1),
    ]
    assert rows[2][2] == (date.fromisoformat(rows[0][2]) + timedelta(days=1)).isoformat()
    assert verify_ledger(store, store.database).ok


def test_the_dashboard_s_usage_by_endpoint_sums_the_days_the_largest_cost_first(ledger):
    store, raw = ledger
    _caught_up(store)
    summed = raw.execute(
        "SELECT endpoint, COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cache_write_tokens), "
        "SUM(cache_hit_tokens), -SUM(amount) FROM ledger_entries WHERE kind = 'charge' AND team_name = 'acme' "
        "GROUP BY endpoint"
    )
    expected = sorted(
        ({"endpoint": r[0], **dict(zip(SUMMED, map(int, r[1:]), strict=True))} for r in summed),
        key=lambda r: (-r["cost"], r["endpoint"]),
    )
    got = _by_endpoint(store, "acme")
    assert got == expected
    assert got[0]["endpoint"] == "embeddings"  # 400 input tokens: the largest cost
    assert next(r for r in got if r["endpoint"] == "chat.completions")["requests"] == 3
    assert [r["endpoint"] for r in _by_endpoint(store, "beta")] == ["messages"]
    raw.execute("UPDATE usage_by_endpoint SET requests = requests + 100 WHERE team_name = 'beta'")
    assert _by_endpoint(store, "beta")[0]["requests"] == 101  # read from the table's days, never the charges


def test_a_rebuild_makes_the_rows_the_projection_made(ledger):
    store, raw = ledger
    _caught_up(store)
    live = raw.execute(ROWS)
    raw.execute("DELETE FROM usage_by_endpoint WHERE endpoint = 'embeddings'")
    raw.execute("UPDATE usage_by_endpoint SET cost = cost + 7 WHERE endpoint = 'batches'")
    with closing(HistoryProjection(store, store.database)) as history:
        history.rebuild()
    assert raw.execute(ROWS) == live == raw.execute(FROM_ENTRIES)
    assert verify_ledger(store, store.database).ok


def test_verify_finds_a_tampered_a_missing_and_a_forged_row(ledger):
    store, raw = ledger
    _caught_up(store)
    ((day,),) = raw.execute("SELECT day FROM usage_by_endpoint WHERE endpoint = 'batches'")
    ((counted,),) = raw.execute("SELECT cost FROM usage_by_endpoint WHERE endpoint = 'batches'")
    raw.execute("UPDATE usage_by_endpoint SET cost = cost + 1 WHERE endpoint = 'batches'")
    report = verify_ledger(store, store.database)
    assert not report.ok
    assert report.problems[0].startswith(f"usage by endpoint for ('acme', 'batches', '{day}') is [2, 16, 4, 0, 0, ")
    assert report.problems[0].endswith(f"{counted + 1}], the events say [2, 16, 4, 0, 0, {counted}]")

    raw.execute("DELETE FROM usage_by_endpoint WHERE endpoint = 'batches'")
    report = verify_ledger(store, store.database)
    assert report.problems == [f"usage by endpoint is missing [('acme', 'batches', '{day}')]"]

    with closing(HistoryProjection(store, store.database)) as history:
        history.rebuild()
    raw.execute(
        "INSERT INTO usage_by_endpoint SELECT team_name, 'images.edits', day, requests, input_tokens, output_tokens, "
        "cache_write_tokens, cache_hit_tokens, cost FROM usage_by_endpoint WHERE endpoint = 'batches'"
    )
    report = verify_ledger(store, store.database)
    assert report.problems[0].startswith(f"usage by endpoint for ('acme', 'images.edits', '{day}') is [2, ")
    assert report.problems[0].endswith("the events say None")


def test_the_rows_made_again_from_the_audit_history_are_the_projected_rows(ledger):
    """What puts a history back (``scripts/ledger_scale/setback.py``) fills the table from the entries."""
    store, raw = ledger
    _caught_up(store)
    live = raw.execute(ROWS)
    ((position,),) = raw.execute("SELECT MAX(notification_id) FROM ledger_entries")
    with closing(Sql(store.database)) as sql, sql.transaction() as tx:
        tx.execute("DELETE FROM usage_by_endpoint")
        tx.execute(*rows_from_entries(position))
    assert raw.execute(ROWS) == live
    with closing(Sql(store.database)) as sql, sql.transaction() as tx:
        tx.execute("DELETE FROM usage_by_endpoint")
        tx.execute(*rows_from_entries(position - 1))  # the last charge (acme's, the day after) left out
    assert raw.execute(ROWS) == [r for r in live if r[2] == live[0][2]]
