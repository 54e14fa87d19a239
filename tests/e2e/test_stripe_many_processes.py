"""Stripe's webhooks delivered to several gateway processes of one ledger at once (a load balancer in
front of three): each event five times, concurrently, spread over the three; the payment is credited
once and its refund taken back once, whichever process records it.

Prices: 100 credits per USD (the suite's configuration), so $25.00 buys 2,500 credits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal

import pytest

from tests.support import plain_http
from tests.support.fake_stripe import FakeStripe
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway
from tests.support.payments import STRIPE_ENV, paying_gateway
from tests.support.teams import Teams, teams_of

PROCESSES = 3
COPIES = 5


@pytest.fixture(scope="module")
def gateways(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream, stripe_fake: FakeStripe
) -> Iterator[list[Gateway]]:
    for first in paying_gateway(tmp_path_factory.mktemp("many"), fake_upstream.base_url, stripe_fake, redis=True):
        others = [Gateway(first.config, env=STRIPE_ENV).start() for _ in range(PROCESSES - 1)]
        try:
            yield [first, *others]
        finally:
            for other in others:
                other.stop()


@pytest.fixture(scope="module")
def teams(gateways: list[Gateway]) -> Iterator[Teams]:
    yield from teams_of(gateways[0].config)


def test_each_webhook_five_times_at_once_to_three_processes_credits_and_refunds_once(
    gateways: list[Gateway], teams: Teams, stripe_fake: FakeStripe
):
    team = teams.open(balance="1")
    first = gateways[0]
    started = plain_http.post(
        f"{first.base_url}/credits/checkout",
        json={"amount": "25"},
        headers={"Authorization": f"Bearer {team.key}"},
        timeout=30,
    )
    assert started.status_code == 200, started.text
    urls = [f"{g.root_url}/webhooks/stripe" for g in gateways]
    stripe_fake.webhooks.hold()
    session = stripe_fake.complete_checkout(started.json()["data"]["id"])
    sent = stripe_fake.webhooks.release(copies=COPIES, concurrently=True, urls=urls)
    assert len({d.url for d in sent}) == PROCESSES
    assert all(d.ok for d in sent), [(d.type, d.status) for d in sent if not d.ok]
    assert balance(first, team.key) == Decimal(2501)
    stripe_fake.webhooks.hold()
    stripe_fake.refund(str(session["payment_intent"]), amount=700)
    sent = stripe_fake.webhooks.release(copies=COPIES, concurrently=True, urls=urls)
    assert any(d.type == "charge.refunded" for d in sent)
    assert all(d.ok for d in sent)
    for gateway in gateways:  # every process answers from the same ledger
        assert balance(gateway, team.key) == Decimal(1801)
    rows = [json.loads(line) for line in first.cli("ledger", "export", "--team", team.name, "--format", "jsonl")
            .stdout.splitlines()]  # fmt: skip
    assert [r["kind"] for r in rows if r["kind"] in ("top_up", "refund")] == ["top_up", "top_up", "refund"]


def balance(gateway: Gateway, key: str) -> Decimal:
    answer = plain_http.get(f"{gateway.base_url}/credits", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    return Decimal(str(answer.json()["data"]["balance"]))
