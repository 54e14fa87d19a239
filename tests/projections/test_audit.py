"""`verify_ledger` proves a history whole, and finds the first thing that is not."""

from __future__ import annotations

import sqlite3
from decimal import Decimal

from app.admin import create_team
from app.ledger_writer import LedgerWriter
from domain.ledger import team_id
from domain.pricing import Price, TokenUsage
from projections.audit import verify_ledger
from projections.event_store import open_ledger_store

PRICE = Price(Decimal("2.5"), Decimal("10"), Decimal("3.125"), Decimal("1.25"))


def ledger_with_a_charge(tmp_path):
    store = open_ledger_store("sqlite:///ledger.db", tmp_path)
    with LedgerWriter(store) as writer:
        create_team(writer, "acme", 1_000_000)
        tid = team_id("acme")
        writer.on_team(tid, "acme", lambda t: t.place_hold("r1", 500_000, "k", "m", "chat")).result()
        writer.on_team(tid, "acme", lambda t: t.charge("r1", TokenUsage(100, 50), PRICE, Decimal(100),
                                                       key_id="k", model="m", endpoint="chat")).result()
    return store


def test_a_whole_history_verifies(tmp_path):
    store = ledger_with_a_charge(tmp_path)
    report = verify_ledger(store)
    assert report.ok and (report.events, report.teams, report.charges) == (4, 1, 1)


def test_a_charge_whose_cost_does_not_follow_from_its_usage_is_found(tmp_path):
    store = ledger_with_a_charge(tmp_path)
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        db.execute("UPDATE stored_events SET state = CAST(replace(CAST(state AS TEXT), "
                   "'\"output_tokens\":50', '\"output_tokens\":40') AS BLOB) WHERE topic LIKE '%Charged'")
    report = verify_ledger(store)
    assert not report.ok
    assert "recorded cost 75000 but its usage at its price costs 65000" in report.problems[0]


def test_a_balances_read_model_that_drifted_is_found(tmp_path):
    store = ledger_with_a_charge(tmp_path)
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        db.execute("UPDATE team_balances SET balance = balance + 1")
    report = verify_ledger(store)
    assert not report.ok and "balances read model says balance 925001" in report.problems[0]


def test_a_missing_event_is_found(tmp_path):
    store = ledger_with_a_charge(tmp_path)
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        db.execute("DELETE FROM stored_events WHERE topic LIKE '%HoldPlaced'")
    report = verify_ledger(store)
    assert not report.ok and "cannot be applied" in report.problems[0]


def test_an_unreadable_event_is_reported_not_crashed_on(tmp_path):
    store = ledger_with_a_charge(tmp_path)
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        db.execute("UPDATE stored_events SET state = X'7B6E6F' WHERE topic LIKE '%Charged'")
    report = verify_ledger(store)
    assert not report.ok and "cannot be read" in report.problems[0]
