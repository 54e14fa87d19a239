"""Credit a team buys itself, through Stripe, against the fake Stripe (proven with the official library)
and a real gateway: a team key starts a Checkout Session, the payer pays, Stripe's webhooks credit the
team once however often and however concurrently they are delivered, a delivery Stripe did not sign
changes nothing, and refunds and disputes take the credit back as entries of their own.

Prices: 100 credits per USD (the suite's configuration), so $20.00 buys 2,000 credits."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.support import plain_http
from tests.support.fake_stripe import FakeStripe
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway
from tests.support.payments import STRIPE_ENV, paying_gateway
from tests.support.teams import Team, Teams, teams_of


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream, stripe_fake: FakeStripe
) -> Iterator[Gateway]:
    table = """min_amount = 5
max_amount = 500
success_url = "https://gateway.example/credits?paid={CHECKOUT_SESSION_ID}"
cancel_url = "https://gateway.example/credits"
"""
    yield from paying_gateway(tmp_path_factory.mktemp("stripe"), fake_upstream.base_url, stripe_fake, table)


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def checkout(gateway: Gateway, team: Team, amount: object) -> httpx.Response:
    return plain_http.post(
        f"{gateway.base_url}/credits/checkout",
        json={"amount": amount},
        headers={"Authorization": f"Bearer {team.key}"},
        timeout=30,
    )


def balance(gateway: Gateway, team: Team) -> Decimal:
    answer = plain_http.get(f"{gateway.base_url}/credits", headers={"Authorization": f"Bearer {team.key}"}, timeout=10)
    return Decimal(str(answer.json()["data"]["balance"]))


def credits_of(gateway: Gateway, team: Team) -> dict[str, Any]:
    answer = plain_http.get(f"{gateway.base_url}/credits", headers={"Authorization": f"Bearer {team.key}"}, timeout=10)
    data: dict[str, Any] = answer.json()["data"]
    return data


def paid_top_up(gateway: Gateway, team: Team, stripe_fake: FakeStripe, amount: str = "20") -> str:
    """A top-up paid: its PaymentIntent's id, once every webhook was answered."""
    started = checkout(gateway, team, amount)
    assert started.status_code == 200, started.text
    session = stripe_fake.complete_checkout(started.json()["data"]["id"])
    stripe_fake.webhooks.wait_idle()
    return str(session["payment_intent"])


def history(gateway: Gateway, team: Team) -> list[dict[str, Any]]:
    import json

    lines = gateway.cli("ledger", "export", "--team", team.name, "--format", "jsonl").stdout.splitlines()
    return [json.loads(line) for line in lines]


def test_a_paid_checkout_credits_the_team_once(gateway: Gateway, team: Team, stripe_fake: FakeStripe):
    before = balance(gateway, team)
    started = checkout(gateway, team, "20.00")
    assert started.status_code == 200, started.text
    data = started.json()["data"]
    assert (data["amount"], data["currency"], Decimal(str(data["credits"]))) == ("20.00", "usd", Decimal(2000))
    assert data["url"].startswith(stripe_fake.base_url)
    assert balance(gateway, team) == before  # nothing before the payment succeeded
    session = stripe_fake.complete_checkout(data["id"])
    stripe_fake.webhooks.wait_idle()
    assert balance(gateway, team) == before + 2000
    sent = [d for d in stripe_fake.webhooks.deliveries if d.url.endswith("/webhooks/stripe")]
    assert {d.type for d in sent} >= {"checkout.session.completed", "payment_intent.succeeded"}
    assert all(d.ok for d in sent)
    top_ups = [row for row in history(gateway, team) if row["kind"] == "top_up" and row["reference"].startswith("pi_")]
    assert [row["reference"] for row in top_ups] == [session["payment_intent"]]
    (lot,) = [lot for lot in credits_of(gateway, team)["lots"] if lot["reference"] == session["payment_intent"]]
    assert lot["kind"] == "paid"


def test_every_redelivery_even_concurrent_changes_nothing(gateway: Gateway, team: Team, stripe_fake: FakeStripe):
    paid_top_up(gateway, team, stripe_fake)
    after = balance(gateway, team)
    for delivery in [d for d in stripe_fake.webhooks.deliveries if d.url.endswith("/webhooks/stripe")][-2:]:
        copies = stripe_fake.webhooks.redeliver(delivery.event_id, copies=5, concurrently=True)
        stripe_fake.webhooks.wait_idle()
        assert all(copy.ok for copy in copies)
    assert balance(gateway, team) == after


def test_a_delivery_stripe_did_not_sign_is_refused_and_stripes_own_in_any_order_credit_once(
    gateway: Gateway, team: Team, stripe_fake: FakeStripe
):
    stripe_fake.webhooks.hold()
    started = checkout(gateway, team, "10").json()["data"]
    stripe_fake.complete_checkout(started["id"])
    event = next(e for e in stripe_fake.webhooks.pending if e["type"] == "checkout.session.completed")
    payload = stripe_fake.webhooks.payload(event)
    before = balance(gateway, team)
    for signature in (
        stripe_fake.webhooks.header(payload, secret="whsec_someone_else"),
        stripe_fake.webhooks.header(payload, timestamp=stripe_fake.now() - 3600),
        "",
    ):
        refused = plain_http.post(
            f"{gateway.root_url}/webhooks/stripe",
            content=payload,
            headers={"stripe-signature": signature, "content-type": "application/json"},
            timeout=10,
        )
        assert refused.status_code == 400
        assert "Stripe-Signature" in refused.json()["error"]["message"]
    forged = re.sub(rb'"amount_total": ?\d+', b'"amount_total": 100000', payload)
    assert forged != payload
    refused = plain_http.post(
        f"{gateway.root_url}/webhooks/stripe",
        content=forged,
        headers={"stripe-signature": stripe_fake.webhooks.header(payload)},
        timeout=10,
    )
    assert refused.status_code == 400
    assert balance(gateway, team) == before
    # Stripe's own deliveries of the same checkout, newest first and each twice: credited once.
    stripe_fake.webhooks.release("reversed", copies=2)
    stripe_fake.webhooks.wait_idle()
    assert balance(gateway, team) == before + 1000


def test_a_refund_and_a_dispute_take_the_credit_back_as_entries_of_their_own(
    gateway: Gateway, team: Team, stripe_fake: FakeStripe
):
    payment = paid_top_up(gateway, team, stripe_fake, "30")
    before = balance(gateway, team)
    stripe_fake.refund(payment, amount=1000)  # $10 of $30
    stripe_fake.webhooks.wait_idle()
    assert balance(gateway, team) == before - 1000
    stripe_fake.refund(payment, amount=500)
    stripe_fake.webhooks.wait_idle()
    assert balance(gateway, team) == before - 1500
    for delivery in [d for d in stripe_fake.webhooks.deliveries if d.type == "charge.refunded"]:
        stripe_fake.webhooks.redeliver(delivery.event_id, copies=2)  # late and repeated: nothing more
    stripe_fake.webhooks.wait_idle()
    assert balance(gateway, team) == before - 1500
    dispute = stripe_fake.dispute(payment, amount=1500)
    stripe_fake.webhooks.wait_idle()
    assert balance(gateway, team) == before - 3000
    stripe_fake.close_dispute(str(dispute["id"]), won=True)
    stripe_fake.webhooks.wait_idle()
    assert balance(gateway, team) == before - 1500
    kinds = [row["kind"] for row in history(gateway, team) if row["kind"] in ("refund", "dispute", "dispute_closed")]
    assert kinds == ["refund", "refund", "dispute", "dispute_closed"]


def test_an_amount_outside_the_bounds_or_not_a_number_is_refused_in_the_chat_error_shape(gateway: Gateway, team: Team):
    for amount in ("4.99", "501", "lots", "1e400", "20.001"):
        refused = checkout(gateway, team, amount)
        assert refused.status_code == 400, amount
        assert refused.json()["error"]["param"] == "amount"
    assert checkout(gateway, Team(team.name, "tg-not-a-key"), "20").status_code == 401


def reconcile(gateway: Gateway, *args: str) -> Any:
    from tests.support.cli_fork import run_tollgate
    from tests.support.gateway import GATEWAY_ENV

    env = {**os.environ, **GATEWAY_ENV, **STRIPE_ENV}
    today = datetime.now(UTC).date().isoformat()
    return run_tollgate(
        ["payments", "reconcile", "--since", today, *args, "--config", str(gateway.config)], env, timeout=60
    )


def test_reconcile_finds_a_payment_and_a_refund_whose_webhooks_never_came_and_records_them_once(
    gateway: Gateway, team: Team, stripe_fake: FakeStripe
):
    assert reconcile(gateway).returncode == 0  # what came before this test agrees
    stripe_fake.webhooks.hold()
    started = checkout(gateway, team, "12").json()["data"]
    session = stripe_fake.complete_checkout(started["id"])
    stripe_fake.refund(str(session["payment_intent"]), amount=200)
    stripe_fake.webhooks.pending.clear()  # lost for good
    stripe_fake.webhooks.release()
    before = balance(gateway, team)
    found = reconcile(gateway)
    assert found.returncode == 1
    assert f"differs: team {team.name}: payment not credited: {session['payment_intent']}" in found.stdout
    assert "1200 credits" in found.stdout
    applied = reconcile(gateway, "--apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "recorded:" in applied.stdout
    assert balance(gateway, team) == before + 1000  # the payment's 1,200, less the 200 refunded since
    kinds = [row["kind"] for row in history(gateway, team)][-2:]
    assert kinds == ["top_up", "refund"]
    assert reconcile(gateway).returncode == 0
    assert "0 difference(s)" in reconcile(gateway).stdout


def test_reconcile_finds_a_credit_stripe_never_took_the_money_for_and_takes_it_back_once(
    gateway: Gateway, team: Team, stripe_fake: FakeStripe
):
    """A payment_intent.succeeded signed with the webhook secret (leaked, say) for a PaymentIntent
    Stripe never had: the webhook credits it, reconciliation finds Stripe has no such payment."""
    import json

    assert reconcile(gateway).returncode == 0
    before = balance(gateway, team)
    intent = {
        "id": "pi_3NeverPaidAtStripe0001",
        "object": "payment_intent",
        "amount": 900,
        "amount_received": 900,
        "currency": "usd",
        "customer": None,
        "status": "succeeded",
        "metadata": {"tollgate_team": team.name},
    }
    event = {
        "id": "evt_3NeverPaidAtStripe0001",
        "object": "event",
        "type": "payment_intent.succeeded",
        "created": stripe_fake.now(),
        "livemode": False,
        "data": {"object": intent},
    }
    payload = json.dumps(event).encode()
    forged = plain_http.post(
        f"{gateway.root_url}/webhooks/stripe",
        content=payload,
        headers={"stripe-signature": stripe_fake.webhooks.header(payload), "content-type": "application/json"},
        timeout=10,
    )
    assert forged.status_code == 200, forged.text
    assert balance(gateway, team) == before + 900
    found = reconcile(gateway)
    assert found.returncode == 1
    line = f"differs: team {team.name}: credited but not paid (Stripe: missing): pi_3NeverPaidAtStripe0001"
    assert line in found.stdout, found.stdout
    assert "900 credits" in found.stdout
    applied = reconcile(gateway, "--apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert balance(gateway, team) == before
    (taken,) = [row for row in history(gateway, team) if row["kind"] == "refund" and row["actor"] == "reconcile"]
    assert taken["reference"].startswith("pi_3NeverPaidAtStripe0001")
    assert "0 difference(s)" in reconcile(gateway).stdout


def test_a_refund_of_credit_already_spent_is_owed_and_the_team_is_refused_until_a_top_up_pays_it(
    gateway: Gateway, teams: Teams, stripe_fake: FakeStripe
):
    team = teams.open("0")
    payment = paid_top_up(gateway, team, stripe_fake, "5")  # 500 credits
    gateway.cli("credits", "adjust", "--team", team.name, "--reason", "spent elsewhere", "--", "-499.9")
    stripe_fake.refund(payment)  # all $5 back: 0.1 credits left to take, 499.9 owed
    stripe_fake.webhooks.wait_idle()
    data = credits_of(gateway, team)
    assert (Decimal(str(data["balance"])), Decimal(str(data["owed"]))) == (Decimal(0), Decimal("499.9"))
    body = {"model": "fake-gpt", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
    headers = {"Authorization": f"Bearer {team.key}"}
    refused = plain_http.post(f"{gateway.base_url}/chat/completions", json=body, headers=headers, timeout=30)
    assert refused.status_code == 402, refused.text
    assert refused.json()["error"]["type"] == "billing_error"
    assert "owe" in refused.json()["error"]["message"]
    paid_top_up(gateway, team, stripe_fake, "10")  # 1,000 credits: what is owed is paid first
    data = credits_of(gateway, team)
    assert (Decimal(str(data["balance"])), Decimal(str(data["owed"]))) == (Decimal("500.1"), Decimal(0))
    served = plain_http.post(f"{gateway.base_url}/chat/completions", json=body, headers=headers, timeout=30)
    assert served.status_code == 200, served.text
