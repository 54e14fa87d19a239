"""Auto-recharge through a real gateway and the fake Stripe (proven with the official library): a
team that paid once through Checkout (its card saved) sets a threshold, a target and a monthly cap;
traffic taking its available balance under the threshold makes exactly one off-session payment,
however many requests cross it at once; the credit counts once that payment succeeded, once however
often Stripe's webhooks come; three declined attempts turn auto-recharge off and raise an alert.

Prices: 100 credits per USD (the suite's configuration), so one cent buys one credit."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import httpx
import pytest

from domain.auto_recharge import RETRY_SECONDS
from tests.support import plain_http
from tests.support.fake_stripe import FakeStripe
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway
from tests.support.payments import STRIPE_ENV, paying_gateway
from tests.support.teams import Team, Teams, teams_of

CONCURRENT = 200


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream, stripe_fake: FakeStripe
) -> Iterator[Gateway]:
    yield from paying_gateway(tmp_path_factory.mktemp("recharge"), fake_upstream.base_url, stripe_fake, redis=True)


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def dec(value: object) -> Decimal:
    """A figure of the API's JSON (credits are exact decimals, sent as JSON numbers) as a Decimal."""
    return Decimal(str(value))


def auth(team: Team) -> dict[str, str]:
    return {"Authorization": f"Bearer {team.key}"}


def credits_of(gateway: Gateway, team: Team) -> dict[str, Any]:
    data: dict[str, Any] = plain_http.get(f"{gateway.base_url}/credits", headers=auth(team), timeout=10).json()["data"]
    return data


def pay_once_through_checkout(gateway: Gateway, team: Team, stripe_fake: FakeStripe, amount: str = "10") -> str:
    """The team's first top-up, by card (saved for later): its PaymentIntent."""
    started = plain_http.post(
        f"{gateway.base_url}/credits/checkout", json={"amount": amount}, headers=auth(team), timeout=30
    )
    assert started.status_code == 200, started.text
    session = stripe_fake.complete_checkout(started.json()["data"]["id"])
    stripe_fake.webhooks.wait_idle()
    return str(session["payment_intent"])


def set_auto_recharge(gateway: Gateway, team: Team, **figures: object) -> httpx.Response:
    return plain_http.put(f"{gateway.base_url}/credits/auto-recharge", json=figures, headers=auth(team), timeout=30)


def chat(gateway: Gateway, team: Team, client: httpx.Client | None = None) -> httpx.Response:
    body = {"model": "fake-gpt", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}
    send = client.post if client is not None else httpx.post
    return send(f"{gateway.base_url}/chat/completions", json=body, headers=auth(team), timeout=60)


def recharge_intents(stripe_fake: FakeStripe, team: Team) -> list[dict[str, Any]]:
    with stripe_fake.account.lock:
        intents = list(stripe_fake.account.objects["payment_intent"].values())
    return [pi for pi in intents if (pi.get("metadata") or {}).get("tollgate_team") == team.name
            and "tollgate_recharge" in (pi.get("metadata") or {})]  # fmt: skip


def attempts(gateway: Gateway, team: Team) -> list[dict[str, Any]]:
    answer = plain_http.get(f"{gateway.base_url}/credits/auto-recharge", headers=auth(team), timeout=10)
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["data"]["auto_recharge"]["attempts"]
    return found


def settled(gateway: Gateway, team: Team, count: int, within: float = 20.0) -> list[dict[str, Any]]:
    """The team's attempts, once ``count`` of them are settled (the recharger polls its outbox)."""
    deadline = time.monotonic() + within
    while True:
        found = attempts(gateway, team)
        if sum(1 for a in found if a["settled_at"]) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_requests_crossing_the_threshold_at_once_make_exactly_one_payment_credited_once(
    gateway: Gateway, teams: Teams, stripe_fake: FakeStripe
):
    team = teams.open(balance="0")
    first = pay_once_through_checkout(gateway, team, stripe_fake)  # 1,000 credits, the card saved
    assert chat(gateway, team).status_code == 200
    cost = Decimal(1000) - dec(credits_of(gateway, team)["balance"])
    assert cost > 0
    available = dec(credits_of(gateway, team)["available"])
    threshold = available - 20 * cost  # crossed about the twentieth request
    target = available + 100 + 2 * CONCURRENT * cost  # one recharge ($1 and more) carries the burst above it
    answer = set_auto_recharge(gateway, team, threshold=str(threshold), target=str(target), monthly_cap="100000")
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["auto_recharge"]["enabled"] is True

    with plain_http.Client(limits=httpx.Limits(max_connections=CONCURRENT)) as client, ThreadPoolExecutor(64) as pool:
        answers = list(pool.map(lambda _: chat(gateway, team, client), range(CONCURRENT)))
    assert [a.status_code for a in answers] == [200] * CONCURRENT

    found = settled(gateway, team, 1)
    assert len(found) == 1, found
    (attempt,) = found
    stripe_fake.webhooks.wait_idle()
    (intent,) = recharge_intents(stripe_fake, team)  # exactly one PaymentIntent, never two at once
    assert intent["status"] == "succeeded"
    assert intent["payment_method"] in stripe_fake.saved_cards(intent["customer"])  # the card Checkout saved
    assert intent["metadata"]["tollgate_recharge"] == attempt["id"]
    assert (attempt["outcome"], attempt["payment_intent"]) in {
        ("succeeded", intent["id"]),
        ("succeeded (credited by its webhook)", intent["id"]),
    }
    # Its credit: what the payment bought (the amount asked, rounded up to a whole cent), once.
    asked = dec(attempt["credits"])
    assert Decimal(intent["amount"]) == asked.to_integral_value(rounding="ROUND_CEILING")
    for delivery in [d for d in stripe_fake.webhooks.deliveries if d.type == "payment_intent.succeeded"][-1:]:
        stripe_fake.webhooks.redeliver(delivery.event_id, copies=5, concurrently=True)
    stripe_fake.webhooks.wait_idle()
    rows = gateway.charges(team.name)  # every charge, as the ledger exported them
    charged = sum(Decimal(row["amount"]) for row in rows) / 1_000_000
    assert dec(credits_of(gateway, team)["balance"]) == 1000 + Decimal(intent["amount"]) + charged
    history = [r for r in gateway_history(gateway, team) if r["kind"] in ("recharge_started", "top_up")]
    assert [r["kind"] for r in history] == ["top_up", "recharge_started", "top_up"]
    assert [r["reference"] for r in history if r["kind"] == "top_up"] == [first, intent["id"]]
    recharges = statement_section(gateway, team, "auto_recharges")
    assert [(r["kind"], r["count"]) for r in recharges] == [("started", 1), ("credited", 1)]
    assert recharges[1]["amount_micros"] == int(intent["amount"]) * 1_000_000  # a cent buys a credit


def statement_section(gateway: Gateway, team: Team, section: str) -> list[dict[str, Any]]:
    """The rows of a section of the team's statement for this month (chained, and verified)."""
    import json

    path = gateway.config.parent / f"statement-{team.name}.json"
    gateway.cli("ledger", "statement", "--team", team.name, "--chained", "--output", str(path))
    gateway.cli("ledger", "verify", "--statement", str(path))
    document = json.loads(path.read_text())
    assert document["reconciled"] is True
    rows: list[dict[str, Any]] = document[section]
    return rows


def admin(gateway: Gateway, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return plain_http.request(
        method,
        f"{gateway.root_url}/admin{path}",
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        timeout=30,
        **kwargs,
    )


def test_three_declined_attempts_turn_auto_recharge_off_and_raise_an_alert(
    gateway: Gateway, teams: Teams, stripe_fake: FakeStripe
):
    """Each attempt after a decline waits ten minutes: two more processes on the same ledger, their
    clocks ahead by that and by twice that, make the second and third."""
    team = teams.open(balance="0")
    pay_once_through_checkout(gateway, team, stripe_fake)
    figures = {"threshold": "2000", "target": "3000", "monthly_cap": "50000", "reason": "ops ticket 7"}
    answer = admin(gateway, "PUT", f"/teams/{team.name}/auto-recharge", json=figures)
    assert answer.status_code == 200, answer.text
    stripe_fake.decline_next(3)
    later = [
        Gateway(gateway.config, env={**STRIPE_ENV, "TOLLGATE_CLOCK_OFFSET": str(offset), "TOLLGATE_CLOCK_DRILL": "1"})
        for offset in (RETRY_SECONDS + 100, 2 * RETRY_SECONDS + 200)
    ]
    try:
        for n, serving in enumerate([gateway, *later]):
            if serving is not gateway:
                serving.start()
            assert chat(serving, team).status_code == 200  # under the threshold: an attempt, declined
            found = settled(gateway, team, n + 1)
            assert found[0]["outcome"].startswith("failed: card declined"), found
            stripe_fake.webhooks.wait_idle()
    finally:
        for serving in later:
            serving.stop()
    state = admin(gateway, "GET", f"/teams/{team.name}/auto-recharge").json()["auto_recharge"]
    assert (state["enabled"], state["failures_in_a_row"], state["pending"]) == (False, 3, None)
    assert len(state["attempts"]) == 3
    assert len({pi["id"] for pi in stripe_fake.account.objects["payment_intent"].values()
                if pi["metadata"].get("tollgate_team") == team.name and pi["status"] != "succeeded"}) == 3  # fmt: skip
    alerts = admin(gateway, "GET", f"/teams/{team.name}/alerts").json()["alerts"]
    assert [(a["kind"], a["request_id"]) for a in alerts] == [("auto_recharge_off", state["attempts"][0]["id"])]
    kinds = [r["kind"] for r in gateway_history(gateway, team) if r["kind"].startswith(("recharge", "auto_"))]
    assert kinds == ["auto_recharge"] + ["recharge_started", "recharge_failed"] * 3
    recharges = statement_section(gateway, team, "auto_recharges")
    assert [(r["kind"], r["count"]) for r in recharges] == [("started", 3), ("failed", 3)]
    assert chat(gateway, team).status_code == 200  # still under the threshold, but off: no fourth
    time.sleep(1)
    assert len(attempts(gateway, team)) == 3


def test_settings_the_team_and_the_operator_set_and_read_and_what_is_refused(gateway: Gateway, teams: Teams):
    team = teams.open(balance="5")
    refused = [
        set_auto_recharge(gateway, team, threshold="10", target="5", monthly_cap="100"),  # target under threshold
        set_auto_recharge(gateway, team, threshold="10", target="50"),  # no cap
        set_auto_recharge(gateway, team, threshold="-1", target="50", monthly_cap="100"),
        set_auto_recharge(gateway, team, threshold="ten", target="50", monthly_cap="100"),
        set_auto_recharge(gateway, team, threshold="1", target="50", monthly_cap="0"),
        set_auto_recharge(gateway, team, threshold="1", target="50", monthly_cap="1e999"),
    ]
    for answer in refused:
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["type"] == "invalid_request_error"
    assert set_auto_recharge(gateway, Team(team.name, "tg-not-a-key"), enabled=False).status_code == 401
    on = set_auto_recharge(gateway, team, threshold="1", target="50.5", monthly_cap="100", reason="ours")
    assert on.status_code == 200, on.text
    shown = on.json()["data"]["auto_recharge"]
    assert (dec(shown["threshold"]), dec(shown["target"]), dec(shown["monthly_cap"])) == (1, Decimal("50.5"), 100)
    summary = credits_of(gateway, team)["auto_recharge"]
    assert (summary["enabled"], dec(summary["target"]), summary["pending"]) == (True, Decimal("50.5"), None)
    off = set_auto_recharge(gateway, team, enabled=False).json()["data"]["auto_recharge"]
    assert (off["enabled"], dec(off["target"])) == (False, Decimal("50.5"))  # its figures kept
    cli = gateway.cli("credits", "auto-recharge", "--team", team.name, "--threshold", "2", "--target", "20",
                      "--monthly-cap", "40", "--reason", "phone call")  # fmt: skip
    assert "is on: under 2 credits available, up to 20, at most 40 a month" in cli.stdout
    bad = gateway.cli("credits", "auto-recharge", "--team", team.name, "--off", "--target", "3", check=False)
    assert bad.returncode != 0
    rows = [r for r in gateway_history(gateway, team) if r["kind"] == "auto_recharge"]
    assert [(r["reference"], r["actor"].split(":")[0], r["reason"]) for r in rows] == [
        ("threshold=1000000 target=50500000 monthly_cap=100000000", "key", "ours"),
        ("off", "key", ""),
        ("threshold=2000000 target=20000000 monthly_cap=40000000", rows[2]["actor"].split(":")[0], "phone call"),
    ]


def gateway_history(gateway: Gateway, team: Team) -> list[dict[str, Any]]:
    import json

    lines = gateway.cli("ledger", "export", "--team", team.name, "--format", "jsonl").stdout.splitlines()
    return [json.loads(line) for line in lines]
