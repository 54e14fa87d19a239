"""Hostile input on the payment routes: NUL and control characters, 100 KB strings, the whole Unicode
range, wrong JSON types and bytes that are not JSON, sent to POST /v1/credits/checkout, the dashboard's
checkout, POST /webhooks/stripe and the admin API's lot terms. Each is refused in its route's error
shape, starts no Checkout Session, moves no money, and the ledger verifies after (the module's gateway)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.support import plain_http
from tests.support.fake_stripe import FakeStripe
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway
from tests.support.payments import paying_gateway
from tests.support.teams import Team, Teams, teams_of

EVERY_CHARACTER = "".join(chr(c) for c in range(0x20, 0x3000) if not 0xD800 <= c <= 0xDFFF)
HOSTILE_VALUES: list[Any] = [
    "2\x000",
    "\x01\x02\x1b[31m20",
    "9" * 100_000,
    EVERY_CHARACTER,
    "-20",
    "NaN",
    "sNaN",
    "Infinity",
    "1e99999",
    1e308,
    True,
    None,
    [20],
    {"amount": 20},
]
HOSTILE_BODIES = [
    b"",
    b"\x00\xff\xfe",
    b"{",
    b"[]",
    b'"20"',
    b'{"amount": 20' + b" " * 100_000,
    '{"amount": "\ud800"}'.encode("utf-8", "surrogatepass"),
]


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream, stripe_fake: FakeStripe
) -> Iterator[Gateway]:
    yield from paying_gateway(tmp_path_factory.mktemp("hostile"), fake_upstream.base_url, stripe_fake)


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def balance(gateway: Gateway, team: Team) -> Decimal:
    answer = plain_http.get(f"{gateway.base_url}/credits", headers={"Authorization": f"Bearer {team.key}"}, timeout=10)
    return Decimal(str(answer.json()["data"]["balance"]))


def sessions(stripe_fake: FakeStripe) -> int:
    return sum(1 for r in stripe_fake.requests if r.path == "/v1/checkout/sessions" and r.method == "POST")


@pytest.mark.parametrize("where", ["api", "dashboard"])
def test_a_hostile_amount_is_refused_and_starts_nothing(
    gateway: Gateway, team: Team, stripe_fake: FakeStripe, where: str
):
    url = (
        f"{gateway.base_url}/credits/checkout"
        if where == "api"
        else f"{gateway.root_url}/dashboard/api/teams/{team.name}/checkout"
    )
    before, started = balance(gateway, team), sessions(stripe_fake)
    headers = {"Authorization": f"Bearer {team.key}", "content-type": "application/json"}
    for value in HOSTILE_VALUES:
        answer = plain_http.post(url, content=json.dumps({"amount": value}), headers=headers, timeout=30)
        assert answer.status_code == 400, (value if len(str(value)) < 80 else str(value)[:80], answer.text[:200])
        assert answer.json()["error"]["type"] == "invalid_request_error"
    for body in HOSTILE_BODIES:
        answer = plain_http.post(url, content=body, headers=headers, timeout=30)
        assert 400 <= answer.status_code < 500, (body[:40], answer.status_code, answer.text[:200])
        assert "error" in answer.json()
    assert (balance(gateway, team), sessions(stripe_fake)) == (before, started)


def test_a_hostile_webhook_is_refused_and_moves_nothing(gateway: Gateway, team: Team, stripe_fake: FakeStripe):
    before = balance(gateway, team)
    url = f"{gateway.root_url}/webhooks/stripe"
    signatures = ["", "t=1,v1=00", "\x00" * 10, "t=" + "9" * 10_000 + ",v1=ab", "t=1,v1=" + EVERY_CHARACTER[:2000]]
    for body in [*HOSTILE_BODIES, json.dumps({"id": "evt_1", "type": "checkout.session.completed"}).encode()]:
        for signature in signatures:
            try:
                answer = plain_http.post(url, content=body, headers={"stripe-signature": signature}, timeout=30)
            except (httpx.LocalProtocolError, UnicodeEncodeError):
                continue  # a header value HTTP itself cannot carry never reaches the gateway
            assert answer.status_code in (400, 413), (body[:40], signature[:40], answer.status_code)
    assert balance(gateway, team) == before


def test_hostile_lot_terms_are_refused_by_the_admin_api(gateway: Gateway, team: Team):
    before = balance(gateway, team)
    admin = plain_http.Client(base_url=f"{gateway.root_url}/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    with admin:
        for terms in (
            {"kind": "paid\x00"},
            {"kind": EVERY_CHARACTER},
            {"kind": ["paid"]},
            {"expires_at": "2030-01-01T00:00:00Z\x00"},
            {"expires_at": "9" * 100_000},
            {"expires_at": 12},
            {"priority": "5\x00"},
            {"priority": 1e308},
            {"priority": [1]},
            {"priority": -1},
        ):
            answer = admin.post(f"/teams/{team.name}/credits", json={"amount": "1", **terms})
            assert answer.status_code == 400, (str(terms)[:80], answer.status_code, answer.text[:200])
            assert answer.json()["error"]["type"] == "invalid_request_error"
    assert balance(gateway, team) == before


@pytest.mark.parametrize("where", ["team", "admin"])
def test_hostile_auto_recharge_settings_are_refused_and_set_nothing(gateway: Gateway, team: Team, where: str):
    url, key = (
        (f"{gateway.base_url}/credits/auto-recharge", team.key)
        if where == "team"
        else (f"{gateway.root_url}/admin/teams/{team.name}/auto-recharge", ADMIN_KEY)
    )
    headers = {"Authorization": f"Bearer {key}", "content-type": "application/json"}
    good = {"threshold": "1", "target": "10", "monthly_cap": "100"}
    for name in good:
        for value in HOSTILE_VALUES:
            if value is None:
                continue  # a figure left out: refused too, but tested in tests/e2e/test_auto_recharge.py
            answer = plain_http.put(url, content=json.dumps({**good, name: value}), headers=headers, timeout=30)
            assert answer.status_code == 400, (name, str(value)[:80], answer.text[:200])
            assert answer.json()["error"]["type"] == "invalid_request_error"
    for reason in ("why\x00", "\x1b[31m", "9" * 100_000):
        answer = plain_http.put(url, content=json.dumps({**good, "reason": reason}), headers=headers, timeout=30)
        assert answer.status_code == 400, (reason[:40], answer.text[:200])
    for enabled in ("yes", 1, None, [True]):
        answer = plain_http.put(url, content=json.dumps({**good, "enabled": enabled}), headers=headers, timeout=30)
        assert answer.status_code == 400, (enabled, answer.text[:200])
    for body in HOSTILE_BODIES:
        answer = plain_http.put(url, content=body, headers=headers, timeout=30)
        assert 400 <= answer.status_code < 500, (body[:40], answer.status_code, answer.text[:200])
        assert "error" in answer.json()
    shown = plain_http.get(url, headers=headers, timeout=30).json()
    state = shown["data"]["auto_recharge"] if where == "team" else shown["auto_recharge"]
    assert (state["enabled"], state["threshold"]) == (False, None)  # nothing was ever set
