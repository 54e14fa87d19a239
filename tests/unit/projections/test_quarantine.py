"""No event stops the audit history projection: text no database can store is made storable by one
rule, and an event it still cannot project is set aside, the events after it projected, and
``ledger verify`` fails naming it."""

from __future__ import annotations

import sqlite3
from decimal import Decimal

import psycopg
import pytest

from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.store.event_store import LedgerStore, open_ledger_store
from app.store.storable import REPLACEMENT, Unstorable, storable_row, storable_text
from domain.attribution import Attribution
from domain.ledger import team_id
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage
from projections.audit import verify_ledger
from projections.history import HistoryProjection
from projections.quarantine import refused_for_its_data
from tests.support.backend import BACKEND, RawDatabase, new_database_url

PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))


def test_only_what_no_database_can_store_is_replaced():
    assert storable_text("evil\x00user") == f"evil{REPLACEMENT}user"
    assert storable_text("a\ud800b\udfff") == f"a{REPLACEMENT}b{REPLACEMENT}"
    kept = "caf\u00e9 \u202e \x1b \U0001f600"  # refused where clients send it, but storable: kept as it is
    assert storable_text(kept) is kept
    row = (1, "plain", 2**63 - 1, -(2**63), None, "x")
    assert storable_row(row) is row
    assert storable_row((1, "a\x00", "b")) == (1, f"a{REPLACEMENT}", "b")
    with pytest.raises(Unstorable, match="64-bit"):
        storable_row((1, 2**63))


def test_only_a_refusal_of_the_values_written_is_the_events_fault():
    assert refused_for_its_data(psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"))
    assert refused_for_its_data(OverflowError("Python int too large to convert to SQLite INTEGER"))
    assert refused_for_its_data(UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"))
    assert refused_for_its_data(sqlite3.IntegrityError("NOT NULL constraint failed: ledger_entries.end_user"))
    assert not refused_for_its_data(sqlite3.IntegrityError("UNIQUE constraint failed: ledger_entries.notification_id"))
    assert not refused_for_its_data(sqlite3.OperationalError("database is locked"))
    assert not refused_for_its_data(psycopg.OperationalError("connection refused"))
    assert not refused_for_its_data(psycopg.errors.AdminShutdown("terminating connection"))
    assert refused_for_its_data(psycopg.errors.NumericValueOutOfRange("bigint out of range"))
    assert not refused_for_its_data(psycopg.errors.UniqueViolation("duplicate key"))


@pytest.fixture
def ledger(tmp_path):
    url = new_database_url()
    store = open_ledger_store(url, tmp_path)
    yield store, RawDatabase(url, tmp_path)
    store.close()


def _charges(store: LedgerStore, *usages: TokenUsage, end_user: str = "") -> None:
    with LedgerWriter(store) as writer:
        LedgerService(writer).create_team("acme", 10**9)
        tid = team_id("acme")
        for i, usage in enumerate(usages):
            writer.on_team(tid, "acme", lambda t: t.add_credits(10**9, "top-up")).result()  # a huge charge takes all
            writer.on_team(
                tid, "acme", lambda t, i=i: t.place_hold(RequestOnLedger(f"r{i}", "k", "m", "chat"), 1000)
            ).result()
            request = RequestOnLedger(f"r{i}", "k", "m", "chat", Attribution({}, end_user))
            writer.on_team(
                tid, "acme", lambda t, r=request, u=usage: t.charge_priced(r, u, PRICE, Decimal(100))
            ).result()


def _project(store: LedgerStore, batch: int = 500) -> HistoryProjection:
    history = HistoryProjection(store, store.database)
    history.catch_up(batch=batch)
    return history


def test_an_unreadable_event_is_set_aside_and_the_events_after_it_are_projected(ledger):
    store, raw = ledger
    _charges(store, TokenUsage(10, 5), TokenUsage(20, 5), TokenUsage(30, 5))
    second = raw.events("Charged")[1]
    raw.set_event_state(second[0], b"{not an event")
    history = _project(store, batch=2)  # the unreadable event in a slice of its own and in one with another
    try:
        charged = raw.execute("SELECT request_id FROM ledger_entries WHERE kind = 'charge' ORDER BY notification_id")
        assert [r[0] for r in charged] == ["r0", "r2"]
        assert history.position() == (store.recorder.max_notification_id() or 0)
        assert [q["notification_id"] for q in history.quarantined()] == [second[0]]
        assert history.quarantined()[0]["topic"].endswith("TeamLedger.Charged")
    finally:
        history.close()
    report = verify_ledger(store, store.database)
    assert not report.ok
    assert report.quarantined == 1  # the replay itself finds the event unreadable too (it comes first)
    assert "cannot be read" in report.problems[0]


def test_old_text_is_stored_made_storable_and_verify_agrees(ledger):
    store, raw = ledger
    _charges(store, TokenUsage(10, 5), end_user="evil\x00user")
    _project(store).close()
    assert raw.execute("SELECT end_user FROM ledger_entries WHERE kind = 'charge'") == [(f"evil{REPLACEMENT}user",)]
    assert raw.execute("SELECT value FROM usage_by_attribution WHERE dimension = 'user'") == [
        (f"evil{REPLACEMENT}user",)
    ]
    report = verify_ledger(store, store.database)
    assert report.ok, report.problems
    assert (report.projected, report.behind, report.quarantined) == (store.recorder.max_notification_id(), 0, 0)


def test_a_charge_no_column_can_hold_is_set_aside_by_the_projection_and_by_a_rebuild(ledger):
    store, raw = ledger
    _charges(store, TokenUsage(10, 5), TokenUsage(10**20, 5), TokenUsage(30, 5))
    huge = raw.events("Charged")[1][0]
    _project(store).close()
    assert [
        r[0]
        for r in raw.execute("SELECT request_id FROM ledger_entries WHERE kind = 'charge' ORDER BY notification_id")
    ] == ["r0", "r2"]
    report = verify_ledger(store, store.database)
    assert not report.ok
    assert report.quarantined == 1
    assert f"#{huge} (TeamLedger.Charged)" in report.problems[0]
    history = HistoryProjection(store, store.database)
    try:
        history.rebuild()
        assert [q["notification_id"] for q in history.quarantined()] == [huge]
    finally:
        history.close()
    assert [
        r[0]
        for r in raw.execute("SELECT request_id FROM ledger_entries WHERE kind = 'charge' ORDER BY notification_id")
    ] == ["r0", "r2"]


@pytest.mark.skipif(BACKEND != "postgresql", reason="SQLite turns an integer sum that overflows into a float")
def test_a_slice_the_database_refuses_is_projected_one_event_at_a_time_setting_aside_only_the_refused_one(ledger):
    """Two charges that each fit, whose usage summed in one row does not: the database refuses the
    slice, and the projection finds the event that tipped it over."""
    store, raw = ledger
    _charges(store, TokenUsage(5 * 10**18, 5), TokenUsage(5 * 10**18, 5), TokenUsage(30, 5))
    tipping = raw.events("Charged")[1][0]
    history = _project(store)
    try:
        assert [q["notification_id"] for q in history.quarantined()] == [tipping]
        assert "NumericValueOutOfRange" in history.quarantined()[0]["error"]
        assert history.position() == (store.recorder.max_notification_id() or 0)
    finally:
        history.close()
    assert raw.execute("SELECT requests, input_tokens FROM usage_daily") == [(2, 5 * 10**18 + 30)]


def test_verify_fails_when_the_projection_is_further_behind_than_a_running_projector_ever_is(ledger):
    from projections.audit import MAX_PROJECTION_LAG
    from tests.support.long_history import build_history

    store, _ = ledger
    build_history(store, {"busy": MAX_PROJECTION_LAG // 2 + 10}, snapshot_every=None)  # a hold and a charge each
    report = verify_ledger(store, store.database)
    assert not report.ok
    assert report.behind > MAX_PROJECTION_LAG
    assert f"{report.behind} events behind" in report.problems[0]
    _project(store).close()
    caught_up = verify_ledger(store, store.database)
    assert caught_up.ok, caught_up.problems
    assert caught_up.behind == 0


def test_verify_catches_the_projection_up_first_and_fails_when_it_is_stuck(ledger):
    """``ledger verify`` (the command and the admin API) catches the audit history up as every reader
    of it does: a projection merely behind is checked whole; one that cannot move is a failure, however
    few events it is behind (once, ``verify`` said "6 events behind" and exited 0)."""
    from projections.audit import verify_caught_up
    from projections.history_rows import ENTRY_COLUMNS

    store, raw = ledger
    _charges(store, TokenUsage(10, 5))
    report = verify_caught_up(store)
    assert report.ok, report.problems
    assert (report.behind, report.projected) == (0, store.recorder.max_notification_id())
    with LedgerWriter(store) as writer:
        LedgerService(writer).top_up("acme", 5)
    top = store.recorder.max_notification_id()
    columns = ", ".join(ENTRY_COLUMNS)
    copied = ", ".join("?" if c == "notification_id" else c for c in ENTRY_COLUMNS)
    raw.execute(
        f"INSERT INTO ledger_entries ({columns}) SELECT {copied} FROM ledger_entries "
        "WHERE notification_id = (SELECT MAX(notification_id) FROM ledger_entries)",
        (top,),
    )  # in its way
    stuck = verify_caught_up(store)
    assert not stuck.ok
    assert "cannot catch up" in stuck.problems[0]
    assert stuck.behind == 1
