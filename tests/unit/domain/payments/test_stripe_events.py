"""Stripe events read as Tollgate's payment records (domain/payments/stripe_events.py). The events are
the fake Stripe's, made in process by its account (tests/support/fake_stripe_account.py), whose shapes
tests/e2e/test_fake_stripe.py holds to the stripe library's: the same dicts a webhook delivers."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
import stripe

from domain.payments.stripe_events import (
    TEAM_KEY,
    DisputeClosed,
    DisputeOpened,
    Ignored,
    MalformedEvent,
    PaymentFailed,
    PaymentRefunded,
    PaymentSucceeded,
    read_event,
)
from tests.support.fake_stripe_account import Account, StripeError
from tests.support.fake_stripe_objects import Obj, encode
from tests.support.fake_stripe_webhooks import signature

TEAM = {TEAM_KEY: "acme"}


@pytest.fixture
def account() -> Account:
    return Account(lambda: 1_760_000_000)


def top_up(account: Account, *, team: bool = True, on_intent: bool = True, amount: int = 2000) -> tuple[str, str]:
    """A customer and an open Checkout Session for ``amount`` cents, the team named where asked."""
    customer = account.create_customer("ops@acme.example", None, None, {})["id"]
    fields = {"amount_total": amount, "amount_subtotal": amount, "currency": "usd", "customer": customer}
    intent_data = {"metadata": dict(TEAM), "setup_future_usage": "off_session"} if on_intent else {}
    session = account.create_session({**fields, "metadata": dict(TEAM) if team else {}}, intent_data)
    return customer, session["id"]


def of_type(account: Account, kind: str) -> list[Obj]:
    return [e for e in account.events if e["type"] == kind]


def test_a_paid_checkout_is_one_payment_named_by_its_session_and_its_intent_events(account):
    customer, session = top_up(account)
    paid = account.pay_session(session)
    records = {e["type"]: read_event(e) for e in account.events}
    by_session = records["checkout.session.completed"]
    assert by_session == PaymentSucceeded(
        "acme", paid["payment_intent"], 2000, "usd", session, customer, by_session.event_id, 1_760_000_000
    )
    by_intent = records["payment_intent.succeeded"]
    assert isinstance(by_intent, PaymentSucceeded)
    assert (by_intent.payment_intent_id, by_intent.amount_minor, by_intent.team) == (
        paid["payment_intent"],
        2000,
        "acme",
    )
    assert by_intent.checkout_session_id is None  # a PaymentIntent does not name its Session
    for kind in ("customer.created", "payment_intent.created", "payment_method.attached", "charge.succeeded"):
        assert isinstance(records[kind], Ignored)
        assert kind in records[kind].reason


def test_a_delayed_payment_is_credited_when_it_settles_not_when_the_session_completes(account):
    _, session = top_up(account)
    account.pay_session(session, paid=False)
    (completed,) = [read_event(e) for e in of_type(account, "checkout.session.completed")]
    assert isinstance(completed, Ignored)
    assert "async_payment_succeeded" in completed.reason
    account.settle_session(session)
    (settled,) = [read_event(e) for e in of_type(account, "checkout.session.async_payment_succeeded")]
    assert isinstance(settled, PaymentSucceeded)
    assert (settled.amount_minor, settled.checkout_session_id) == (2000, session)

    _, other = top_up(account)
    account.pay_session(other, paid=False)
    account.settle_session(other, succeeded=False)
    (failed,) = [read_event(e) for e in of_type(account, "checkout.session.async_payment_failed")]
    assert failed == PaymentFailed(
        "acme", failed.payment_intent_id, 2000, "usd", None, None, failed.event_id, 1_760_000_000
    )
    intent_failed = read_event(of_type(account, "payment_intent.payment_failed")[-1])
    assert isinstance(intent_failed, PaymentFailed)
    assert intent_failed.code == "card_declined"


def test_a_payment_without_the_team_is_not_a_top_up(account):
    _, session = top_up(account, team=False, on_intent=False)
    account.pay_session(session)
    for kind in ("checkout.session.completed", "payment_intent.succeeded"):
        (record,) = [read_event(e) for e in of_type(account, kind)]
        assert isinstance(record, Ignored)
        assert TEAM_KEY in record.reason
    # named on the Session only: its event credits; the PaymentIntent's is not ours (Stripe copies neither way)
    _, named = top_up(account, on_intent=False)
    account.pay_session(named)
    assert isinstance(read_event(of_type(account, "checkout.session.completed")[-1]), PaymentSucceeded)
    assert isinstance(read_event(of_type(account, "payment_intent.succeeded")[-1]), Ignored)


def test_off_session_payments_succeed_or_fail_with_the_cards_reason(account):
    customer, session = top_up(account)
    account.pay_session(session)
    (card,) = [pm["id"] for pm in account.objects["payment_method"].values() if pm["customer"] == customer]
    fields = {"amount": 1500, "currency": "usd", "customer": customer, "payment_method": card, "metadata": dict(TEAM)}
    made = account.create_payment_intent(fields, confirm=True, off_session=True)
    succeeded = read_event(of_type(account, "payment_intent.succeeded")[-1])
    assert succeeded == PaymentSucceeded(
        "acme", made["id"], 1500, "usd", None, customer, succeeded.event_id, 1_760_000_000
    )
    for code, decline in (("card_declined", "generic_decline"), ("authentication_required", "authentication_required")):
        account.decline_next(1, code)
        with pytest.raises(StripeError):
            account.create_payment_intent(dict(fields), confirm=True, off_session=True)
        failed = read_event(of_type(account, "payment_intent.payment_failed")[-1])
        assert isinstance(failed, PaymentFailed)
        assert (failed.code, failed.decline_code, failed.amount_minor) == (code, decline, 1500)


def test_refunds_carry_the_charges_total_refunded_so_a_repeat_takes_nothing_twice(account):
    _, session = top_up(account)
    intent = account.pay_session(session)["payment_intent"]
    account.refund(intent, 500, "requested_by_customer", {}, "payment_intent")
    account.refund(intent, None, None, {}, "payment_intent")
    first, second = [read_event(e) for e in of_type(account, "charge.refunded")]
    assert isinstance(first, PaymentRefunded)
    assert isinstance(second, PaymentRefunded)
    assert (first.team, first.payment_intent_id, first.refunded_minor, first.fully) == ("acme", intent, 500, False)
    assert (second.refunded_minor, second.amount_minor, second.fully) == (2000, 2000, True)
    assert first.charge_id == second.charge_id
    assert isinstance(read_event(of_type(account, "refund.created")[0]), Ignored)


def test_disputes_open_and_close_won_or_lost(account):
    payments = []
    for _ in range(3):
        _, session = top_up(account)
        payments.append(account.pay_session(session)["payment_intent"])
    lost = account.dispute(payments[0], None, "fraudulent", False)
    won = account.dispute(payments[1], 1000, "product_not_received", False)
    inquiry = account.dispute(payments[2], None, "general", True)
    opened = [read_event(e) for e in of_type(account, "charge.dispute.created")]
    assert all(isinstance(r, DisputeOpened) for r in opened)
    assert [(r.dispute_id, r.payment_intent_id, r.amount_minor, r.inquiry) for r in opened] == [
        (lost["id"], payments[0], 2000, False),
        (won["id"], payments[1], 1000, False),
        (inquiry["id"], payments[2], 2000, True),
    ]
    for found, result in ((lost, False), (won, True), (inquiry, False)):
        account.close_dispute(found["id"], result)
    closed = [read_event(e) for e in of_type(account, "charge.dispute.closed")]
    assert all(isinstance(r, DisputeClosed) for r in closed)
    assert [(r.status, r.won) for r in closed] == [("lost", False), ("won", True), ("warning_closed", True)]


def test_an_expanded_payment_intent_is_read_by_its_id(account):
    _, session = top_up(account)
    account.pay_session(session)
    event = copy.deepcopy(of_type(account, "checkout.session.completed")[0])
    intent_id = event["data"]["object"]["payment_intent"]
    event["data"]["object"]["payment_intent"] = copy.deepcopy(account.objects["payment_intent"][intent_id])
    record = read_event(event)
    assert isinstance(record, PaymentSucceeded)
    assert record.payment_intent_id == intent_id


def test_the_event_the_library_verified_and_parsed_reads_as_the_delivered_json(account):
    _, session = top_up(account)
    account.pay_session(session)
    payload = encode(of_type(account, "checkout.session.completed")[0])
    secret = "whsec_unit"
    header = f"t={1_760_000_000},v1={signature(payload, secret, 1_760_000_000)}"
    verified = stripe.Webhook.construct_event(payload, header, secret, tolerance=None)
    assert read_event(verified.to_dict()) == read_event(json.loads(payload))


def test_records_are_frozen_and_other_events_are_ignored(account):
    _, session = top_up(account)
    account.pay_session(session)
    record = read_event(of_type(account, "checkout.session.completed")[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.team = "other"  # type: ignore[misc]
    event = {**of_type(account, "customer.created")[0], "type": "invoice.paid"}
    assert read_event(event) == Ignored(event["id"], "invoice.paid", "invoice.paid is not an event Tollgate acts on")


@pytest.mark.parametrize(
    "spoil",
    [
        lambda e: e.update(object="charge"),
        lambda e: e.update(data={}),
        lambda e: e.update(created="yesterday"),
        lambda e: e["data"]["object"].update(amount_total="2000"),
        lambda e: e["data"]["object"].update(amount_total=True),
        lambda e: e["data"]["object"].update(payment_intent=None),
        lambda e: e["data"]["object"].update(payment_intent={"object": "payment_intent"}),
        lambda e: e["data"]["object"].pop("currency"),
    ],
)
def test_an_event_that_is_not_what_its_type_says_is_an_error_not_skipped(account, spoil):
    _, session = top_up(account)
    account.pay_session(session)
    event = copy.deepcopy(of_type(account, "checkout.session.completed")[0])
    spoil(event)
    with pytest.raises(MalformedEvent):
        read_event(event)
