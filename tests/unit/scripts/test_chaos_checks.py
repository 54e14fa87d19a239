"""The chaos suite's checks catch what they claim to: each rule, fed a small history that breaks it
(and one that keeps it), must say so. Without these, a suite that always reports 0 violations
would prove nothing."""

from __future__ import annotations

import dataclasses

import pytest

from domain.settings import parse_settings
from scripts.chaos.answers import check_answers
from scripts.chaos.charges import ChargeChecks, Prices
from scripts.chaos.client import ANSWERED, COMPLETE, ERROR_EVENT, NO_ANSWER, Attempt
from scripts.chaos.faults import KILL, POSTGRES_RESTART, Fault
from scripts.chaos.gateways import write_config
from scripts.chaos.host_faults import CUT_POSTGRES, FREEZE
from scripts.chaos.invariants import check_budgets, check_dead_holds, check_nothing_held, replay
from scripts.chaos.ledger import LedgerEvent, Snapshot
from scripts.chaos.record import RunRecord
from scripts.chaos.teams import Team
from scripts.chaos.traffic import Plan
from scripts.chaos.verdict import Verdict

TEAM = Team("chaos-team-00", 1_000_000, False, ("tg-a", "tg-b"), ("key_a", "key_b"), False)
USAGE = {"input_tokens": 10, "output_tokens": 4, "cache_write_tokens": 0, "cache_hit_tokens": 0}


@pytest.fixture(scope="module")
def prices(tmp_path_factory: pytest.TempPathFactory) -> Prices:
    config = write_config(
        tmp_path_factory.mktemp("chaos"),
        "postgresql://postgres@127.0.0.1:1/x",
        "redis://127.0.0.1:1/0",
        "http://127.0.0.1:1",
    )
    return Prices(parse_settings(config.read_text(), str(config)))


def plan(index: int = 0, *, stream: bool = False, idempotency_key: str = "", fault: str = "") -> Plan:
    return Plan(index, 0.0, 0, 0, 0, "chat", "chaos-gpt", stream, fault, idempotency_key, False, "hello there")


def attempt(
    status: int | None = 200,
    outcome: str = ANSWERED,
    request_id: str = "req_1",
    cost: str | None = "0.0065",
    remaining: str | None = "0.9935",
    **fields: object,
) -> Attempt:
    defaults: dict[str, object] = {"plan": 0, "number": 1, "gateway": 0, "pid": 100, "started": 10.0, "ended": 11.0}
    return Attempt(
        status=status, request_id=request_id, outcome=outcome, cost=cost, remaining=remaining, **{**defaults, **fields}
    )  # type: ignore[arg-type]


def event(position: int, kind: str, at: float = 0.0, **fields: object) -> LedgerEvent:
    return LedgerEvent(position, TEAM.name, kind, position, at, dict(fields))


def charged(
    position: int,
    request_id: str,
    amount: int,
    balance_after: int,
    *,
    lease: str = "",
    hold: int = 0,
    usage: dict[str, int] | None = None,
    at: float = 0.0,
) -> LedgerEvent:
    return event(
        position,
        "Charged",
        at,
        request_id=request_id,
        charged=amount,
        cost=amount,
        uncollected=0,
        hold=hold,
        balance_after=balance_after,
        lease=lease,
        usage=usage or USAGE,
    )


def opened(balance: int = 1_000_000) -> list[LedgerEvent]:
    return [
        event(1, "Opened", name=TEAM.name),
        event(2, "CreditsAdded", amount=balance, reference="opening balance", balance_after=balance),
    ]


def charge_verdict(
    plans: list[Plan], attempts: list[Attempt], events: list[LedgerEvent], prices: Prices, faults: list[Fault] = ()
) -> Verdict:
    verdict = Verdict()
    ChargeChecks(RunRecord(plans, attempts, list(faults), [TEAM], []), Snapshot(events, {}), prices, verdict).run()
    return verdict


def test_an_answer_must_be_charged_once_at_exactly_its_reported_cost(prices: Prices) -> None:
    right = [*opened(), charged(3, "req_1", 6500, 993500)]
    assert charge_verdict([plan()], [attempt()], right, prices).violations == []
    cheaper = [*opened(), charged(3, "req_1", 6499, 993501)]
    told = attempt(remaining=None)  # the cost alone differs
    assert [v.check for v in charge_verdict([plan()], [told], cheaper, prices).violations] == [
        "charge differs from the answer"
    ]
    elsewhere = [*opened(), charged(3, "req_1", 6500, 990000)]
    assert [v.check for v in charge_verdict([plan()], [attempt()], elsewhere, prices).violations] == [
        "charge differs from the answer"
    ]
    twice = [*right, charged(4, "req_1", 6500, 987000)]
    assert [v.check for v in charge_verdict([plan()], [attempt()], twice, prices).violations] == [
        "answered but not charged exactly once"
    ]


def test_a_charge_nobody_was_told_about_is_allowed_only_for_a_request_that_got_no_answer(prices: Prices) -> None:
    stray = [*opened(), charged(3, "req_elsewhere", 6500, 993500)]
    refused = attempt(status=402, cost=None, remaining=None, request_id="req_1", error="Insufficient credits")
    assert [v.check for v in charge_verdict([plan()], [refused], stray, prices).violations] == [
        "charge nobody was told about"
    ]
    lost = attempt(status=None, outcome=NO_ANSWER, request_id="", cost=None, remaining=None)
    assert charge_verdict([plan()], [lost], stray, prices).violations == []


def test_a_cut_stream_is_charged_for_exactly_the_text_it_delivered(prices: Prices) -> None:
    cut = attempt(
        outcome=ERROR_EVENT,
        cost=None,
        remaining=None,
        text="Echo: hello",
        error="The upstream provider broke off its answer",
    )
    delivered = prices.output_tokens(plan(stream=True), "Echo: hello")
    exact = [*opened(), charged(3, "req_1", 4000, 996000, usage={**USAGE, "output_tokens": delivered})]
    assert charge_verdict([plan(stream=True)], [cut], exact, prices).violations == []
    more = [*opened(), charged(3, "req_1", 9000, 991000, usage={**USAGE, "output_tokens": delivered + 5})]
    assert [v.check for v in charge_verdict([plan(stream=True)], [cut], more, prices).violations] == [
        "cut stream charged for other than what it delivered"
    ]
    released = [*opened(), event(3, "RequestFailed", request_id="req_1", lease="lease_x", reason="upstream failed")]
    silent = attempt(outcome=ERROR_EVENT, cost=None, remaining=None, error="The upstream provider broke off")
    assert charge_verdict([plan(stream=True)], [silent], released, prices).violations == []


def test_idempotent_retries_share_one_charge_and_a_replay_reports_the_same_cost(prices: Prices) -> None:
    first = attempt(request_id="req_first")
    busy = attempt(status=409, outcome=ANSWERED, request_id="req_busy", cost=None, remaining=None, number=2)
    replay_ = attempt(request_id="req_first", replayed=True, number=3, replay=True)
    held = [event(3, "HoldPlaced", request_id="req_first", amount=50_000, idem_key="k1")]
    events = opened() + held + [charged(4, "req_first", 6500, 993_500)]
    attempts = [first, busy, replay_]
    assert charge_verdict([plan(idempotency_key="k1")], attempts, events, prices).violations == []
    # A second attempt under the key that was served and charged as well: the key's request, twice.
    twice = [
        *events,
        event(5, "HoldPlaced", request_id="req_second", amount=50000, idem_key="k1"),
        charged(6, "req_second", 6500, 987000),
    ]
    assert [v.check for v in charge_verdict([plan(idempotency_key="k1")], attempts, twice, prices).violations] == [
        "idempotent request not charged once"
    ]
    # An answer under a request that never held under the key.
    stray = attempt(request_id="req_stray", number=4)
    assert "an Idempotency-Key's answer under a request that never held under it" in [
        v.check for v in charge_verdict([plan(idempotency_key="k1")], [first, stray], events, prices).violations
    ]


def test_a_balance_below_zero_at_any_event_fails_even_if_it_ends_above() -> None:
    events = [
        *opened(5000),
        charged(3, "req_1", 6000, -1000),
        event(4, "CreditsAdded", amount=5000, reference="top-up", balance_after=4000),
    ]
    verdict = Verdict()
    replay(Snapshot(events, {}), verdict)
    assert [v.check for v in verdict.violations] == ["ledger replay"]
    assert "below zero" in verdict.violations[0].detail


def test_a_release_must_free_exactly_what_the_lease_still_holds() -> None:
    events = [
        *opened(),
        event(3, "CreditsLeased", lease="lease_x", amount=50000),
        charged(4, "req_1", 6500, 993500, lease="lease_x", hold=6500),
        event(5, "HoldReleased", request_id="lease_x", amount=50000, reason="lease returned"),
    ]
    verdict = Verdict()
    replay(Snapshot(events, {}), verdict)
    assert [v.check for v in verdict.violations] == ["ledger replay"]


def test_a_dead_process_s_lease_must_be_released_within_30_s() -> None:
    kill = Fault(KILL, started=100.0, ended=100.0, pid=100, victim=0)
    leased = [
        *opened(),
        event(3, "CreditsLeased", at=99.0, lease="lease_dead", amount=50000),
        charged(4, "req_1", 6500, 993500, lease="lease_dead", hold=6500, at=99.5),
    ]
    served = [attempt(request_id="req_1")]
    released = event(5, "HoldReleased", at=120.0, request_id="lease_dead", amount=43_500, reason="process died")
    verdict = Verdict()
    check_dead_holds(Snapshot([*leased, released], {}), served, [kill], verdict)
    assert verdict.violations == []
    assert "the last after 20.0 s" in verdict.notes[0]

    late = event(5, "HoldReleased", at=140.0, request_id="lease_dead", amount=43_500, reason="expired")
    verdict = Verdict()
    check_dead_holds(Snapshot([*leased, late], {}), served, [kill], verdict)
    assert [v.check for v in verdict.violations] == ["dead process's hold released late"]

    verdict = Verdict()
    snapshot = Snapshot(leased, {})
    reported = check_dead_holds(snapshot, served, [kill], verdict)
    assert [v.check for v in verdict.violations] == ["dead process's hold not released"]
    check_nothing_held(snapshot, replay(snapshot, verdict), reported, verdict)
    assert len(verdict.violations) == 1  # the same hold is not reported twice


def test_a_503_about_the_ledger_is_documented_only_during_a_database_outage_and_a_500_never() -> None:
    outage = Fault(POSTGRES_RESTART, started=10.5, ended=11.0)
    away = attempt(status=503, cost=None, remaining=None, error="The billing ledger cannot be written right now")
    verdict = Verdict()
    check_answers(RunRecord([plan()], [away], [outage], [TEAM], []), verdict)
    assert verdict.violations == []
    assert verdict.five_xx[503] == 1
    verdict = Verdict()
    check_answers(RunRecord([plan()], [away], [], [TEAM], []), verdict)
    assert [v.check for v in verdict.violations] == ["503 outside the database outage"]
    crash = attempt(status=500, cost=None, remaining=None, error="The gateway hit an internal error.")
    verdict = Verdict()
    check_answers(RunRecord([plan()], [crash], [outage], [TEAM], []), verdict)
    assert [v.check for v in verdict.violations] == ["undocumented 500"]


def test_a_stream_showing_a_traceback_is_a_violation() -> None:
    broken = attempt(outcome=COMPLETE, problems=["a stream frame holds a traceback"])
    verdict = Verdict()
    check_answers(RunRecord([plan(stream=True)], [broken], [], [TEAM], []), verdict)
    assert [v.check for v in verdict.violations] == ["malformed answer"]


def test_a_revoked_key_must_be_refused_soon_after_the_revocation_or_after_an_outage_meanwhile() -> None:
    from scripts.chaos.teams import OperatorAction

    revoked = OperatorAction("revoke", TEAM.name, "key_a", "", started=5.0, ended=6.0, ok=True)
    served = attempt(started=10.0, ended=10.5)
    verdict = Verdict()
    check_answers(RunRecord([plan()], [served], [], [TEAM], [revoked]), verdict)
    assert [v.check for v in verdict.violations] == ["revoked key served"]
    outage = Fault(POSTGRES_RESTART, started=6.5, ended=7.0)  # the gateways learn of it when the database is back
    verdict = Verdict()
    check_answers(RunRecord([plan()], [served], [outage], [TEAM], [revoked]), verdict)
    assert verdict.violations == []
    refused = attempt(
        status=401, cost=None, remaining=None, started=1.0, ended=2.0, error="Incorrect API key provided."
    )
    verdict = Verdict()
    check_answers(RunRecord([plan()], [refused], [], [TEAM], [revoked]), verdict)
    assert [v.check for v in verdict.violations] == ["valid key refused"]


def test_a_host_cut_off_may_answer_the_ledgers_503_and_no_other_host_may() -> None:
    """The multi-host suite: a 503 saying the ledger is away is documented for the host whose packets
    to PostgreSQL were dropped, while they were and for a moment after; another host's is a violation."""
    cut = Fault(CUT_POSTGRES, started=10.0, ended=22.0, victim=1)
    on_victim = attempt(status=503, cost=None, remaining=None, error="The billing ledger cannot be written", gateway=1)
    elsewhere = attempt(status=503, cost=None, remaining=None, error="The billing ledger cannot be written", gateway=0)
    verdict = Verdict()
    check_answers(RunRecord([plan()], [on_victim], [cut], [TEAM], []), verdict)
    assert verdict.violations == []
    assert verdict.causes["503 database away (its host cut off)"] == 1
    verdict = Verdict()
    check_answers(RunRecord([plan()], [elsewhere], [cut], [TEAM], []), verdict)
    assert [v.check for v in verdict.violations] == ["503 outside the database outage"]
    late = attempt(status=503, cost=None, remaining=None, error="The billing ledger", gateway=1, started=60, ended=61)
    verdict = Verdict()
    check_answers(RunRecord([plan()], [late], [cut], [TEAM], []), verdict)
    assert [v.check for v in verdict.violations] == ["503 outside the database outage"]


def test_a_stream_of_a_host_taken_for_dead_may_be_charged_less_than_it_delivered_never_more(prices: Prices) -> None:
    """The others charge a stream of a host they took for dead for what it had delivered at its last
    heartbeat: less than the client got is the documented bound; more is a violation, as is less on
    a host nothing happened to."""
    frozen = Fault(FREEZE, started=9.0, ended=21.0, victim=0)
    cut = attempt(outcome=ERROR_EVENT, cost=None, remaining=None, text="Echo: hello there", error="timed out")
    delivered = prices.output_tokens(plan(stream=True), "Echo: hello there")
    less = [*opened(), charged(3, "req_1", 2000, 998000, usage={**USAGE, "output_tokens": delivered - 2})]
    verdict = charge_verdict([plan(stream=True)], [cut], less, prices, [frozen])
    assert verdict.violations == []
    assert any("taken for dead" in note for note in verdict.notes)
    assert [v.check for v in charge_verdict([plan(stream=True)], [cut], less, prices).violations] == [
        "cut stream charged for other than what it delivered"
    ]
    more = [*opened(), charged(3, "req_1", 9000, 991000, usage={**USAGE, "output_tokens": delivered + 2})]
    assert [v.check for v in charge_verdict([plan(stream=True)], [cut], more, prices, [frozen]).violations] == [
        "cut stream charged for other than what it delivered"
    ]


def test_a_team_with_a_daily_budget_is_never_charged_past_it_and_its_402_says_why() -> None:
    budgeted = Team("chaos-team-02", 50_000_000, False, ("tg-c", "tg-d"), ("key_c", "key_d"), False, budget=100_000)
    day = 1_795_900_000.0  # one instant; charges within a minute of it, the same UTC day
    charges = [
        dataclasses.replace(charged(3, "req_1", 60_000, 0, at=day), team=budgeted.name),
        dataclasses.replace(charged(4, "req_2", 40_000, 0, at=day + 60), team=budgeted.name),
    ]
    verdict = Verdict()
    check_budgets(Snapshot(charges, {}), [budgeted], verdict)
    assert verdict.violations == []
    past = Snapshot([*charges, dataclasses.replace(charged(5, "req_3", 1, 0, at=day + 120), team=budgeted.name)], {})
    verdict = Verdict()
    check_budgets(past, [budgeted], verdict)
    assert [v.check for v in verdict.violations] == ["budget overspent"]
    refused = attempt(status=402, cost=None, remaining=None, error="The team's day budget has 0.01 credits left")
    unexplained = attempt(status=402, cost=None, remaining=None, error="Insufficient credits")
    for answer, found in ((refused, []), (unexplained, ["402 for a team with plenty of credit, not about its budget"])):
        verdict = Verdict()
        check_answers(RunRecord([plan()], [answer], [], [budgeted], []), verdict)
        assert [v.check for v in verdict.violations] == found


def test_a_charge_short_of_its_cost_is_documented_only_for_a_host_taken_for_dead(prices: Prices) -> None:
    """Its hold released by the others while it was cut off, a charge comes out of what the team has:
    less than the cost, the rest uncollected, and the answer says what was taken."""
    answered = attempt(outcome=COMPLETE, cost="0.0019", remaining="0", gateway=1)
    short = event(
        3,
        "Charged",
        request_id="req_1",
        charged=1900,
        cost=2500,
        uncollected=600,
        hold=0,
        balance_after=0,
        lease="",
        usage=USAGE,
    )
    cut = Fault(CUT_POSTGRES, started=9.0, ended=21.0, victim=1)
    events = [*opened(1900), short]
    assert charge_verdict([plan(stream=True)], [answered], events, prices, [cut]).violations == []
    assert [v.check for v in charge_verdict([plan(stream=True)], [answered], events, prices).violations] == [
        "charge differs from the answer"
    ]
