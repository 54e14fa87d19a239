"""A price change in the middle of traffic: every charge is priced by the price in force at its own
instant and names it; replay (``ledger verify``) agrees; and re-rating at the old price list gives
back the old totals exactly, before the change and after it.

The gateway runs on a ledger of its own (the session gateway's prices must not change under other
tests), its fake-gpt priced 2.5 / 10 USD per million tokens; ``tollgate prices apply`` records 5 / 20
from an instant three seconds ahead while the official SDK keeps sending requests from four threads.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import openai
import pytest

from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, run_cli, write_config
from tests.support.teams import Teams

OLD = "pricing = {input = 2.5, output = 10.0, cache_create = 3.125, cache_hit = 1.25}"
NEW = "pricing = {input = 5, output = 20, cache_create = 6.25, cache_hit = 2.5}"


@pytest.fixture(scope="module")
def own_gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    gateway = Gateway(write_config(tmp_path_factory.mktemp("price-change"), fake_upstream.base_url)).start()
    yield gateway
    gateway.stop()


def micros(prompt: int, output: int, price_in: str, price_out: str) -> int:
    return int((prompt * Decimal(price_in) + output * Decimal(price_out)) * 100)


def test_charges_before_and_after_a_price_change_use_their_own_price(own_gateway: Gateway, tmp_path: Path):
    teams = Teams(own_gateway.config)
    team = teams.open("1000")
    teams.close()
    started = datetime.now(UTC)
    stop = threading.Event()
    answered: list[str] = []

    def traffic() -> None:
        with openai.OpenAI(base_url=own_gateway.base_url, api_key=team.key, max_retries=0) as client:
            while not stop.is_set():
                answer = client.chat.completions.with_raw_response.create(
                    model="fake-gpt", messages=[{"role": "user", "content": "price me please"}]
                )
                answered.append(answer.headers["x-request-id"])

    threads = [threading.Thread(target=traffic) for _ in range(4)]
    for thread in threads:
        thread.start()
    new_config = own_gateway.config.parent / "new-prices.toml"  # beside it: the same (relative) database
    new_config.write_text(own_gateway.config.read_text().replace(OLD, NEW, 1))
    try:
        time.sleep(1)
        change = datetime.now(UTC) + timedelta(seconds=3)
        applied = run_cli(new_config, "prices", "apply", "--effective-from", change.isoformat(), "--reason", "new")
        time.sleep(max(0.0, (change - datetime.now(UTC)).total_seconds()) + 1.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    ended = datetime.now(UTC)
    assert "Recorded a price of fake-gpt" in applied.stdout

    rows = own_gateway.charges(team.name)
    assert len(rows) == len(answered)
    before = [r for r in rows if datetime.fromisoformat(r["occurred_at"]) < change]
    after = [r for r in rows if datetime.fromisoformat(r["occurred_at"]) >= change]
    assert before
    assert after
    history = json.loads(own_gateway.cli("prices", "history", "fake-gpt", "--json").stdout)
    old_ref, new_ref = history[-2]["ref"], history[-1]["ref"]
    assert history[-1]["effective_from"] == change.isoformat()
    for row, (ref, price_in, price_out) in [
        *((r, (old_ref, "2.5", "10.0")) for r in before),
        *((r, (new_ref, "5", "20")) for r in after),
    ]:
        assert f"price_ref={ref}" in row["price"], row
        assert f"input={price_in}," in row["price"], row
        assert -int(row["amount"]) == micros(int(row["input_tokens"]), int(row["output_tokens"]), price_in, price_out)

    assert own_gateway.cli("ledger", "verify", check=False).returncode == 0

    def rerated(start: datetime, end: datetime) -> dict:
        return json.loads(
            own_gateway.cli(
                "ledger",
                "rerate",
                "--team",
                team.name,
                "--from",
                start.isoformat(),
                "--to",
                end.isoformat(),
                "--prices",
                str(own_gateway.config),
                "--json",
            ).stdout
        )

    old_cost = sum(-int(r["amount"]) for r in before)
    first = rerated(started, change)  # at the old list, the charges made at it cost what they cost
    assert first["recorded_micros"] == first["rerated_micros"] == old_cost
    second = rerated(change, ended)  # the charges made at the new list, at the old one: the old totals
    assert second["recorded_micros"] == sum(-int(r["amount"]) for r in after)
    assert second["rerated_micros"] == sum(
        micros(int(r["input_tokens"]), int(r["output_tokens"]), "2.5", "10") for r in after
    )
    assert second["rerated_micros"] * 2 == second["recorded_micros"]  # every price doubled
