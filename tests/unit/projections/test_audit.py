"""`verify_ledger` proves a history whole, and finds the first thing that is not."""

from __future__ import annotations

from contextlib import closing
from decimal import Decimal

import pytest

from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.store.event_store import LedgerStore, open_ledger_store
from domain.ledger import team_id
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage
from projections.audit import verify_ledger
from projections.history import HistoryProjection
from projections.history_rows import ENTRY_COLUMNS
from tests.support.backend import RawDatabase, new_database_url

PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))


@pytest.fixture
def ledger(tmp_path) -> tuple[LedgerStore, RawDatabase]:
    """A ledger with one team that was topped up, held and charged; and raw access to its database."""
    url = new_database_url()
    store = open_ledger_store(url, tmp_path)
    with LedgerWriter(store) as writer:
        LedgerService(writer).create_team("acme", 1_000_000)
        tid = team_id("acme")
        writer.on_team(tid, "acme", lambda t: t.place_hold(RequestOnLedger("r1", "k", "m", "chat"), 500_000)).result()
        writer.on_team(
            tid,
            "acme",
            lambda t: t.charge(RequestOnLedger("r1", "k", "m", "chat"), TokenUsage(100, 50), PRICE, Decimal(100)),
        ).result()
    yield store, RawDatabase(url, tmp_path)
    store.close()


def test_a_whole_history_verifies(ledger):
    store, _ = ledger
    report = verify_ledger(store)
    assert report.ok
    assert (report.events, report.teams, report.charges) == (4, 1, 1)


def test_a_charge_whose_cost_does_not_follow_from_its_usage_is_found(ledger):
    store, raw = ledger
    ((event_id, state),) = raw.events("Charged")
    raw.set_event_state(event_id, state.replace(b'"output_tokens":50', b'"output_tokens":40'))
    report = verify_ledger(store)
    assert not report.ok
    assert "recorded cost 75000 but its usage at its price costs 65000" in report.problems[0]


def test_a_balances_read_model_that_drifted_is_found(ledger):
    store, raw = ledger
    raw.execute("UPDATE team_balances SET balance = balance + 1")
    report = verify_ledger(store)
    assert not report.ok
    assert "balances read model says balance 925001" in report.problems[0]


def test_a_missing_event_is_found(ledger):
    store, raw = ledger
    raw.delete_events("HoldPlaced")
    report = verify_ledger(store)
    assert not report.ok
    assert "cannot be applied" in report.problems[0]


def test_an_unreadable_event_is_reported_not_crashed_on(ledger):
    store, raw = ledger
    ((event_id, _),) = raw.events("Charged")
    raw.set_event_state(event_id, b"{no")
    report = verify_ledger(store)
    assert not report.ok
    assert "cannot be read" in report.problems[0]


def test_writes_that_land_while_verify_runs_are_not_mistaken_for_tampering(ledger, tmp_path):
    """Gateways keep writing during a verify: a balances row newer than the replay (or a team opened
    after the replay read the events) is checked against the newer events, not reported."""
    from projections.audit import _check_balances_read_model

    store, _ = ledger
    tid = team_id("acme")
    replayed = {tid: store.find_team(tid, version=2)}  # what verify had replayed when the next events came
    with LedgerWriter(store) as writer:
        LedgerService(writer).create_team("late", 5_000_000)  # opened after the replay
    assert _check_balances_read_model(store, replayed) == []
    assert replayed[tid].version == store.find_team(tid).version
    assert team_id("late") in replayed


def test_a_charge_missing_from_the_once_only_index_is_found_and_a_rebuild_restores_it(ledger, tmp_path):
    store, raw = ledger
    raw.execute("DELETE FROM charged_requests")
    report = verify_ledger(store)
    assert not report.ok
    assert "the once-only charge index has 0 charge(s)" in report.problems[0]
    with closing(HistoryProjection(store, store.database)) as history:
        history.rebuild()
    assert raw.execute("SELECT request_id, charged FROM charged_requests") == [("r1", 75_000)]
    assert verify_ledger(store).ok


def test_a_charge_recorded_twice_in_the_history_is_found(ledger):
    """A second Charged event for one request (slipped in behind the store's back) breaks the index's count."""
    store, raw = ledger
    ((_, state),) = raw.events("Charged")
    team = store.find_team(team_id("acme"))
    raw.execute(
        "INSERT INTO {events} (originator_id, originator_version, topic, state) VALUES (?, ?, ?, ?)",
        (
            raw.execute("SELECT originator_id FROM {events} LIMIT 1")[0][0],
            team.version + 1,
            "domain.ledger:TeamLedger.Charged",
            state.replace(b'"balance_after":925000', b'"balance_after":850000').replace(b'"hold":500000', b'"hold":0'),
        ),
    )
    report = verify_ledger(store)
    assert not report.ok
    assert "the once-only charge index has 1 charge(s)" in report.problems[0]


# -- the audit history, read a page at a time beside the replay ----------------------------------


@pytest.fixture
def projected(ledger):
    """The ledger with its audit history caught up (entries: the team opened at event #1, the top-up at
    #2, the charge at #4)."""
    store, raw = ledger
    history = HistoryProjection(store, store.database)
    history.catch_up()
    history.close()
    assert raw.execute("SELECT notification_id FROM ledger_entries ORDER BY notification_id") == [(1,), (2,), (4,)]
    return store, raw


def _copy_entry(raw: RawDatabase, source: int, notification_id: int) -> None:
    columns = ", ".join(c for c in ENTRY_COLUMNS if c != "notification_id")
    raw.execute(
        f"INSERT INTO ledger_entries (notification_id, {columns}) SELECT ?, {columns} FROM ledger_entries "
        "WHERE notification_id = ?",
        (notification_id, source),
    )


def test_a_projected_history_verifies(projected):
    store, _ = projected
    assert verify_ledger(store, store.database).ok


def test_an_audit_history_row_with_no_entry_behind_it_is_found(projected):
    store, raw = projected
    _copy_entry(raw, 4, 3)  # event #3 is a hold: no entry
    report = verify_ledger(store, store.database)
    assert report.problems == ["audit history row for event #3 has no ledger entry behind it"]


def test_an_audit_history_row_after_every_event_is_found(projected):
    store, raw = projected
    _copy_entry(raw, 4, 99)
    report = verify_ledger(store, store.database)
    assert report.problems == ["audit history row for event #99 has no ledger entry behind it"]


def test_a_missing_audit_history_row_is_found(projected):
    store, raw = projected
    raw.execute("DELETE FROM ledger_entries WHERE notification_id = 2")
    report = verify_ledger(store, store.database)
    assert report.problems == ["audit history is missing the rows of events [2]"]


def test_an_audit_history_row_that_differs_from_its_event_is_found_before_missing_rows(projected):
    store, raw = projected
    raw.execute("DELETE FROM ledger_entries WHERE notification_id = 2")
    raw.execute("UPDATE ledger_entries SET amount = amount - 1 WHERE notification_id = 4")
    report = verify_ledger(store, store.database)
    assert len(report.problems) == 1
    assert report.problems[0].startswith("audit history row for event #4 differs from its event")


@pytest.mark.parametrize(
    ("column", "stored", "said"),
    [
        ("amount", "amount - 1", "its amount is -75001, its event's is -75000"),
        ("reference", "'forged'", "its reference is 'forged', its event's is ''"),
        ("output_tokens", "output_tokens + 5", "its output_tokens is 55, its event's is 50"),
    ],
)
def test_an_audit_history_row_that_differs_says_which_column_and_what_its_event_says(projected, column, stored, said):
    store, raw = projected
    raw.execute(f"UPDATE ledger_entries SET {column} = {stored} WHERE notification_id = 4")
    report = verify_ledger(store, store.database)
    assert report.problems == [f"audit history row for event #4 differs from its event: {said}"]


def test_usage_that_differs_from_the_events_is_found(projected):
    store, raw = projected
    raw.execute("UPDATE usage_daily SET requests = 2")
    report = verify_ledger(store, store.database)
    assert len(report.problems) == 1
    assert report.problems[0].startswith("usage for ('acme', 'k', 'm', ")
    assert "is [2, 100, 50, 0, 0, 75000], the events say [1, 100, 50, 0, 0, 75000]" in report.problems[0]


def test_usage_by_attribution_that_differs_from_the_events_is_found(projected):
    store, raw = projected
    assert raw.execute("SELECT dimension, value, requests, cost FROM usage_by_attribution") == [("user", "", 1, 75000)]
    raw.execute("UPDATE usage_by_attribution SET cost = cost + 1")
    report = verify_ledger(store, store.database)
    assert report.problems[0].startswith("usage by attribution for ('acme', 'user', '', ")
    assert "is [1, 100, 50, 0, 0, 75001], the events say [1, 100, 50, 0, 0, 75000]" in report.problems[0]
    raw.execute("DELETE FROM usage_by_attribution")
    assert verify_ledger(store, store.database).problems[0].startswith("usage by attribution is missing")
