"""Credit lots through a running gateway: an operator's top-ups as lots of a kind, an expiry and a
priority (CLI and admin API), charges drawing promotional credit before paid, a lot expiring while
the gateway serves (written off by an event of its own, before the next request's), and what the
team sees of them (``GET /v1/credits``, ``tollgate credits lots``), the ledger verifying after."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import openai
import pytest

from tests.support import plain_http
from tests.support.charges import reported
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway, verified_gateway, write_config

HI = [{"role": "user", "content": "hello there gateway"}]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    yield from verified_gateway(write_config(tmp_path_factory.mktemp("lots"), fake_upstream.base_url))


def team_with_key(gateway: Gateway, name: str, opening: str) -> str:
    gateway.cli("team", "create", name, "--credits", opening)
    return gateway.cli("key", "create", "--team", name).stdout.splitlines()[-1]


def credits_of(gateway: Gateway, key: str) -> dict[str, Any]:
    answer = plain_http.get(f"{gateway.base_url}/credits", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()["data"]
    return data


def micros(amount: object) -> int:
    return int(Decimal(str(amount)) * 1_000_000)


def ask(gateway: Gateway, key: str) -> int:
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as client:
        answer = client.chat.completions.create(model="fake-gpt", messages=HI, max_tokens=50)  # type: ignore[arg-type]
    return reported(answer.usage)


def test_promotional_credit_is_used_before_paid_and_each_lot_shows_what_it_has_left(gateway: Gateway):
    key = team_with_key(gateway, "promo", "1")
    expires = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    added = gateway.cli(
        "credits", "add", "--team", "promo", "0.5", "--kind", "promotional", "--expires", expires.isoformat()
    )
    assert "balance 1.5" in added.stdout
    cost = ask(gateway, key)
    data = credits_of(gateway, key)
    lots = [(lot["kind"], micros(lot["remaining"]), lot["expires_at"]) for lot in data["lots"]]
    assert lots == [("promotional", 500_000 - cost, expires.isoformat()), ("paid", 1_000_000, None)]
    assert micros(data["balance"]) == 1_500_000 - cost
    by_kind = {kind: micros(left) for kind, left in data["by_kind"].items()}
    assert by_kind == {"promotional": 500_000 - cost, "adjustment": 0, "paid": 1_000_000}
    listed = gateway.cli("credits", "lots", "--team", "promo").stdout.splitlines()
    assert [line.split()[1] for line in listed[1:3]] == ["promotional", "paid"]
    assert listed[-1] == f"balance {Decimal(1_500_000 - cost) / 1_000_000}".rstrip("0").rstrip(".")


def test_a_lot_expiring_while_the_gateway_serves_is_written_off_before_the_next_request(gateway: Gateway):
    key = team_with_key(gateway, "trial", "1")
    soon = datetime.now(UTC) + timedelta(seconds=3)
    gateway.cli("credits", "add", "--team", "trial", "0.3", "--kind", "promotional", "--expires", soon.isoformat())
    assert micros(credits_of(gateway, key)["balance"]) == 1_300_000
    while datetime.now(UTC) < soon + timedelta(seconds=0.2):
        time.sleep(0.1)
    cost = ask(gateway, key)
    rows = [row for row in _history(gateway, "trial") if row["kind"] in ("expiry", "charge")]
    assert [(r["kind"], r["amount"]) for r in rows] == [("expiry", -300_000), ("charge", -cost)]
    assert rows[0]["occurred_at"] == soon.isoformat()  # written off at its expiry instant
    data = credits_of(gateway, key)
    assert [(lot["kind"], micros(lot["remaining"])) for lot in data["lots"]] == [("paid", 1_000_000 - cost)]


def test_the_admin_api_adds_a_lot_on_its_terms_and_refuses_unknown_ones(gateway: Gateway):
    key = team_with_key(gateway, "granted", "1")
    admin = plain_http.Client(base_url=f"{gateway.root_url}/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    with admin:
        added = admin.post(
            "/teams/granted/credits", json={"amount": "2", "kind": "promotional", "priority": 10, "reference": "launch"}
        )
        assert added.status_code == 200, added.text
        for wrong in (
            {"kind": "gift"},
            {"priority": 500},
            {"expires_at": "next tuesday"},
            {"expires_at": "2020-01-01Z"},
        ):
            refused = admin.post("/teams/granted/credits", json={"amount": "1", **wrong})
            assert refused.status_code == 400, wrong
            assert "credit lot" in refused.json()["error"]["message"]
    (first, second) = credits_of(gateway, key)["lots"]
    assert (first["kind"], first["priority"], first["reference"], micros(first["remaining"])) == (
        "promotional",
        10,
        "launch",
        2_000_000,
    )
    assert second["kind"] == "paid"


def _history(gateway: Gateway, team: str) -> list[dict[str, Any]]:
    lines = gateway.cli("ledger", "export", "--team", team, "--format", "jsonl").stdout.splitlines()
    return [json.loads(line) for line in lines]
