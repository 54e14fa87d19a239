"""A team's monthly statement, built from its events: the month's entries, the opening and closing
balances, the charges grouped by model and by key, and a reconciliation that says when the ledger and
the audit history disagree."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.store.event_store import LedgerStore, open_ledger_store
from domain.ledger import TeamLedger, TeamNotFound, team_id
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage
from projections.statements import Month, Statement
from tests.support.backend import RawDatabase, new_database_url

PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))


class Clock:
    """The instant every event is recorded at, set by the test."""

    def __init__(self) -> None:
        self.now = datetime(2026, 10, 20, 12, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fixed = Clock()
    monkeypatch.setattr("eventsourcing.domain.datetime_now_with_tzinfo", fixed)
    monkeypatch.setattr("domain.clock.now", fixed)  # what charges are timestamped by (budgets' periods)
    return fixed


@pytest.fixture
def ledger(tmp_path, clock: Clock) -> Iterator[tuple[LedgerStore, LedgerWriter, RawDatabase]]:
    url = new_database_url()
    store = open_ledger_store(url, tmp_path)
    with LedgerWriter(store) as writer:
        yield store, writer, RawDatabase(url, tmp_path)
    store.close()


def _charge(writer: LedgerWriter, request_id: str, model: str, key_id: str, usage: TokenUsage) -> int:
    tid = team_id("acme")
    writer.on_team(
        tid, "acme", lambda t: t.place_hold(RequestOnLedger(request_id, key_id, model, "chat"), 900_000)
    ).result()
    charged: TeamLedger.Charged = writer.on_team(
        tid, "acme", lambda t: t.charge(RequestOnLedger(request_id, key_id, model, "chat"), usage, PRICE, Decimal(100))
    ).result()
    return charged.charged


@pytest.fixture
def history(ledger, clock: Clock) -> dict[str, int]:
    """October: opened with 10 credits, one charge. November: a top-up, charges on two models and two
    keys (one using the cache), an adjustment each way. December: a top-up and a charge."""
    _, writer, _ = ledger
    service = LedgerService(writer)
    service.create_team("acme", 10_000_000)
    clock.now += timedelta(days=1)
    spent = {"october": _charge(writer, "r0", "m1", "k1", TokenUsage(1000, 100))}
    clock.now = datetime(2026, 11, 1, tzinfo=UTC)  # the month's first instant belongs to it
    service.top_up("acme", 5_000_000, "INV-7")
    clock.now += timedelta(hours=1)
    spent["m1/k1"] = _charge(writer, "r1", "m1", "k1", TokenUsage(2000, 300))
    spent["m2/k1"] = _charge(writer, "r2", "m2", "k1", TokenUsage(100, 50, cache_write_tokens=40, cache_hit_tokens=400))
    spent["m1/k2"] = _charge(writer, "r3", "m1", "k2", TokenUsage(10, 20))
    service.adjust_credits("acme", -250_000, "billed twice", "T-1")
    clock.now = datetime(2026, 11, 30, 23, 59, 59, 999_999, tzinfo=UTC)  # the month's last instant
    service.adjust_credits("acme", 100_000, "goodwill")
    clock.now = datetime(2026, 12, 1, tzinfo=UTC)  # the next month's first instant does not
    service.top_up("acme", 1_000_000, "INV-8")
    spent["december"] = _charge(writer, "r4", "m1", "k1", TokenUsage(5, 5))
    return spent


def _statement(store: LedgerStore, month: str, upto: int | None = None) -> tuple[list[dict], Statement]:
    statement = Statement(store, "acme", Month.parse(month), upto)
    return list(statement.rows()), statement


def _sections(rows: list[dict], section: str) -> list[dict]:
    return [row for row in rows if row["section"] == section]


def test_a_month_has_its_entries_in_ledger_order_and_reconciles(ledger, history):
    store = ledger[0]
    rows, statement = _statement(store, "2026-11")
    entries = _sections(rows, "entry")
    assert [(e["kind"], e.get("request_id") or e.get("reference")) for e in entries] == [
        ("top_up", "INV-7"),
        ("charge", "r1"),
        ("charge", "r2"),
        ("charge", "r3"),
        ("adjustment", "T-1"),
        ("adjustment", ""),
    ]
    assert [e["version"] for e in entries] == sorted(e["version"] for e in entries)
    assert entries[0]["occurred_at"] == "2026-11-01T00:00:00+00:00"
    assert entries[-1]["reason"] == "goodwill"
    charged = history["m1/k1"] + history["m2/k1"] + history["m1/k2"]
    opening = 10_000_000 - history["october"]
    closing = opening + 5_000_000 - charged - 250_000 + 100_000
    figures = statement.figures
    assert (figures.opening, figures.top_ups, figures.charges.charged, figures.adjustments, figures.closing) == (
        opening,
        5_000_000,
        charged,
        -150_000,
        closing,
    )
    assert figures.reconciled, figures.problems
    assert sum(e["amount_micros"] for e in entries) == closing - opening  # the entries' amounts add up
    assert entries[-1]["balance_after_micros"] == closing
    summary = {
        row["section"]: row for row in rows if row["section"] not in ("entry", "charges_by_model", "charges_by_key")
    }
    assert list(summary) == [
        "opening_balance",
        "top_ups",
        "charges",
        "adjustments",
        "closing_balance",
        "reconciliation",
        "log_checkpoint",
    ]
    assert (summary["opening_balance"]["amount_micros"], summary["closing_balance"]["amount_micros"]) == (
        opening,
        closing,
    )
    assert summary["top_ups"]["count"] == 1
    assert (summary["adjustments"]["count"], summary["adjustments"]["amount"]) == (2, "-0.15")
    reconciliation = summary["reconciliation"]
    assert reconciliation["reconciled"] is True
    assert reconciliation["amount_micros"] == reconciliation["balance_after_micros"] == closing
    assert reconciliation["note"].startswith("reconciled: opening ")
    assert "the audit history's 6 entries agree" in reconciliation["note"]
    # the ledger's own point-in-time reading agrees
    team, _ = store.load_team(team_id("acme"), at=Month.parse("2026-12").start - timedelta(microseconds=1))
    assert team is not None
    assert team.balance == closing


def test_charges_are_grouped_by_model_and_by_key(ledger, history):
    rows, statement = _statement(ledger[0], "2026-11")
    by_model = {row["model"]: row for row in _sections(rows, "charges_by_model")}
    by_key = {row["key_id"]: row for row in _sections(rows, "charges_by_key")}
    assert list(by_model) == ["m1", "m2"]
    assert list(by_key) == ["k1", "k2"]
    assert (by_model["m1"]["count"], by_model["m1"]["amount_micros"]) == (2, history["m1/k1"] + history["m1/k2"])
    assert (by_model["m1"]["input_tokens"], by_model["m1"]["output_tokens"]) == (2010, 320)
    assert (by_model["m2"]["cache_write_tokens"], by_model["m2"]["cache_hit_tokens"]) == (40, 400)
    assert (by_key["k1"]["count"], by_key["k1"]["amount_micros"]) == (2, history["m1/k1"] + history["m2/k1"])
    assert (by_key["k2"]["count"], by_key["k2"]["amount_micros"]) == (1, history["m1/k2"])
    (total,) = _sections(rows, "charges")
    assert total["count"] == 3
    assert (
        total["amount_micros"]
        == sum(r["amount_micros"] for r in by_model.values())
        == sum(r["amount_micros"] for r in by_key.values())
        == statement.figures.charges.charged
    )
    assert total["input_tokens"] == 2110
    assert "uncollected" not in total  # nothing went uncollected


def test_the_months_around_it_follow_on(ledger, history):
    store = ledger[0]
    _, october = _statement(store, "2026-10")
    _, november = _statement(store, "2026-11")
    _, december = _statement(store, "2026-12")
    assert october.figures.opening == 0
    assert (october.figures.top_ups, october.figures.charges.charged) == (10_000_000, history["october"])
    assert october.figures.closing == november.figures.opening
    assert november.figures.closing == december.figures.opening
    assert december.figures.charges.charged == history["december"]
    assert all(s.figures.reconciled for s in (october, november, december))


def test_a_month_before_the_team_or_in_the_future_is_empty_and_opening_equals_closing(ledger, history):
    store = ledger[0]
    for month, balance in (("2026-09", 0), ("2027-03", None)):
        rows, statement = _statement(store, month)
        assert _sections(rows, "entry") == []
        figures = statement.figures
        assert figures.opening == figures.closing
        assert figures.reconciled
        if balance is not None:
            assert figures.closing == balance
    assert statement.figures.closing == store.find_team(team_id("acme")).balance  # type: ignore[union-attr]


def test_an_unknown_team_has_no_statement(ledger):
    with pytest.raises(TeamNotFound):
        Statement(ledger[0], "nobody", Month.parse("2026-11"))


def test_a_statement_read_up_to_a_version_is_the_same_whenever_it_is_read_again(ledger, history, clock):
    """A month still going on: its statement names the version it reached, and regenerated up to it
    gives the same rows, whatever came after."""
    store, writer, _ = ledger
    first, statement = _statement(store, "2026-12")
    version = statement.figures.closing_version
    clock.now = datetime(2026, 12, 5, tzinfo=UTC)
    _charge(writer, "r5", "m2", "k2", TokenUsage(7, 7))
    again, _ = _statement(store, "2026-12", upto=version)
    assert again == first
    now, _ = _statement(store, "2026-12")
    assert len(_sections(now, "entry")) == len(_sections(first, "entry")) + 1


def test_an_audit_history_that_disagrees_is_said_and_not_reconciled(ledger, history):
    store, _, raw = ledger
    _statement(store, "2026-11")  # catches the history up
    raw.execute("UPDATE ledger_entries SET amount = amount - 1 WHERE request_id = 'r2'")
    rows, statement = _statement(store, "2026-11")
    assert not statement.figures.reconciled
    (reconciliation,) = _sections(rows, "reconciliation")
    assert reconciliation["reconciled"] is False
    assert reconciliation["note"].startswith("NOT RECONCILED: ")
    assert "the audit history has 3 charge entries" in reconciliation["note"]
    assert "model 'm2'" in reconciliation["note"]
    assert "key 'k1'" in reconciliation["note"]


def test_a_recorded_balance_the_replay_does_not_give_is_said(ledger, history):
    store, _, raw = ledger
    ((event_id, state),) = [e for e in raw.events("CreditsAdjusted") if b"goodwill" in e[1]]
    raw.set_event_state(event_id, state.replace(b'"balance_after":', b'"balance_after":1'))
    _, statement = _statement(store, "2026-11")
    assert not statement.figures.reconciled
    assert "the entry records the balance after it as" in statement.figures.problems[0]


@pytest.mark.parametrize(
    "text", ["2026-13", "2026-00", "26-11", "2026-1", "2026/11", "november", " ", "\uff12\uff10\uff12\uff16-11"]
)  # full-width digits
def test_a_month_is_written_yyyy_mm(text):
    with pytest.raises(ValueError, match="YYYY-MM"):
        Month.parse(text)


@pytest.mark.parametrize("text", ["0000-01", "0001-01", "1969-12", "9999-01", "9999-12"])
def test_a_month_is_one_a_ledger_can_have(text):
    with pytest.raises(ValueError, match="from 1970-01 to 9998-12"):
        Month.parse(text)


def test_a_month_runs_from_its_first_instant_to_the_next_months():
    assert Month.parse("2026-12") == Month(
        "2026-12", datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)
    )
    assert Month.parse("2028-02").end == datetime(2028, 3, 1, tzinfo=UTC)
    assert Month.parse("9998-12").end == datetime(9999, 1, 1, tzinfo=UTC)
    assert Month.parse(" 1970-01 ").text == "1970-01"
