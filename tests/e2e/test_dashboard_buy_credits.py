"""The dashboard's "Buy credits", in Chromium: a team signed in with its key sees its credit lots, asks
for a top-up, is sent to (the fake) Stripe's Checkout page, pays, comes back, and sees the credit
Stripe's webhook brought — a paid lot, once. Prices: 100 credits per USD, so $20 buys 2,000."""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support import plain_http
from tests.support.fake_stripe import FakeStripe
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway
from tests.support.payments import paying_gateway
from tests.support.teams import Team, Teams, teams_of


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream, stripe_fake: FakeStripe
) -> Iterator[Gateway]:
    back = f"{stripe_fake.base_url}/back"
    table = f'success_url = "{back}?paid={{CHECKOUT_SESSION_ID}}"\ncancel_url = "{back}"'
    yield from paying_gateway(tmp_path_factory.mktemp("buy"), fake_upstream.base_url, stripe_fake, table)


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


@pytest.fixture
def page(browser: Browser, gateway: Gateway) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.goto(f"{gateway.root_url}/dashboard")
    yield tab
    context.close()


def test_a_team_buys_credits_from_its_dashboard_and_sees_the_paid_lot(
    page: Page, gateway: Gateway, team: Team, stripe_fake: FakeStripe
):
    page.fill("#key", team.key)
    page.click("#sign-in-button")
    expect(page.locator("#balance-value")).to_have_text("100")
    expect(page.locator("#lots tbody tr")).to_have_count(1)
    expect(page.locator("#buy-currency")).to_contain_text("USD")
    page.fill("#buy-amount", "20")
    page.click("#buy-button")
    page.wait_for_url(re.compile(re.escape(stripe_fake.base_url) + r"/c/pay/cs_"))
    page.click("button:has-text('Pay')")
    page.wait_for_url(re.compile(re.escape(stripe_fake.base_url) + r"/back\?paid=cs_"))
    stripe_fake.webhooks.wait_idle()
    page.goto(f"{gateway.root_url}/dashboard")
    expect(page.locator("#balance-value")).to_have_text("2,100")
    kinds = page.locator("#lots tbody tr td:nth-child(2)")
    expect(kinds).to_have_text(["paid", "paid"])
    answer = plain_http.get(f"{gateway.base_url}/credits", headers={"Authorization": f"Bearer {team.key}"}, timeout=10)
    assert Decimal(str(answer.json()["data"]["balance"])) == 2100


def test_an_operator_starts_a_teams_top_up_and_an_auditor_cannot(gateway: Gateway, team: Team):
    auditor = gateway.cli("admin-key", "issue", "--name", "ann", "--role", "auditor").stdout.strip().splitlines()[-1]
    url = f"{gateway.root_url}/dashboard/api/teams/{team.name}/checkout"
    done = plain_http.post(url, json={"amount": "20"}, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30)
    assert done.status_code == 200, done.text
    assert done.json()["url"].startswith("http")
    refused = plain_http.post(url, json={"amount": "20"}, headers={"Authorization": f"Bearer {auditor}"}, timeout=30)
    assert refused.status_code == 403
    assert "'auditor'" in refused.json()["error"]["message"]


def test_an_amount_outside_the_bounds_is_said_on_the_page(page: Page, team: Team):
    page.fill("#key", team.key)
    page.click("#sign-in-button")
    page.fill("#buy-amount", "1")
    page.click("#buy-button")
    expect(page.locator("#buy-error")).to_contain_text("A top-up is from 5 to 10000 usd")
