"""``tollgate ledger rerate --apply`` through the real CLI, against a real ledger: it refunds what a
charge collected, never what it cost, and it moves a team's money for a model's charges once.

Two findings of the second hostile-input round: on a budget-capped key that paid 1.0 credit, a
half-price re-rate refunded 84.2 credits (it summed the charges' costs, not what they collected); and
the same day written with a ``+01:00`` offset, or the same prices file with a comment added, applied
again (three applies refunded 254 credits on a day of 2.09).

fake-gpt costs 2.5 USD per million prompt tokens and 10 per million output tokens, at 100 credits per
USD: a prompt token is 250 micro-credits, an output token (reasoning included) 1,000.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import openai
import pytest

from tests.e2e.test_budgets import admin, key_id_of, until_budgeted
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.refusals import money_of
from tests.support.teams import Team

HALF = """
[[models]]
id = "fake-gpt"
pricing = {input = 1.25, output = 5, cache_create = 1.5625, cache_hit = 0.625}
"""
TENTH = """
[[models]]
id = "fake-gpt"
pricing = {input = 0.25, output = 1, cache_create = 0.3125, cache_hit = 0.125}
"""
#: HALF again, as another person writes it: a comment, another key order, other spellings of the numbers.
HALF_RESPELLED = """
# the corrected list, checked by finance
[[models]]
pricing = {cache_hit = 0.6250, output = 5.0, input = 1.250, cache_create = 1.5625, cache_write_1h = 1.5625}
id = "fake-gpt"   # the only model re-rated
"""


@pytest.fixture(scope="module")
def own_gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    gateway = Gateway(write_config(tmp_path_factory.mktemp("rerate-once"), fake_upstream.base_url)).start()
    yield gateway
    gateway.stop()


def prices_file(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(text)
    return str(path)


def new_team(gateway: Gateway, name: str, balance: str) -> Team:
    gateway.cli("team", "create", name, "--credits", balance)
    return Team(name, gateway.cli("key", "create", "--team", name).stdout.strip().splitlines()[-1])


def rerate(gateway: Gateway, team: str, start: str, end: str, prices: str, *apply: str, check: bool = True) -> dict:
    """``tollgate ledger rerate`` as an operator runs it, with ``--json``."""
    done = gateway.cli(
        "ledger",
        "rerate",
        "--team",
        team,
        "--from",
        start,
        "--to",
        end,
        "--prices",
        prices,
        *apply,
        "--json",
        check=check,
    )
    return json.loads(done.stdout) if done.returncode == 0 else {"refused": done.stderr, "code": done.returncode}


def until_past(instant: datetime) -> None:
    """Wait until ``instant`` has passed: only a period that has ended is re-rated."""
    time.sleep(max(0.0, (instant - datetime.now(UTC)).total_seconds()) + 0.05)


def test_a_capped_charge_is_refunded_at_most_what_it_collected_beyond_its_new_cost(
    own_gateway: Gateway, tmp_path: Path
):
    team = new_team(own_gateway, "capped", "100")
    key_id = key_id_of(own_gateway, team)
    with admin(own_gateway) as api:
        assert (
            api.put(f"/teams/{team.name}/keys/{key_id}/budget", json={"credits": "1", "period": "day"}).status_code
            == 200
        )
    with openai.OpenAI(base_url=own_gateway.base_url, api_key=team.key, max_retries=0) as client:
        until_budgeted(client)
        started = datetime.now(UTC)
        # 3,000 reasoning tokens beyond the 5 output tokens the request was held for: the charge is cut
        # short at the key's budget of 1 credit.
        answer = client.chat.completions.create(
            model="fake-gpt", max_tokens=5, messages=[{"role": "user", "content": "think hard [[reason:3000]]"}]
        )
        ended = datetime.now(UTC) + timedelta(seconds=0.1)
        until_past(ended)
        assert answer.usage is not None
        prompt, output = answer.usage.prompt_tokens, answer.usage.completion_tokens
        cost = prompt * 250 + output * 1_000  # about 3 credits, of which the budget let 1 be collected
        assert cost > 3_000_000
        [charge] = own_gateway.charges(team.name)
        assert int(charge["amount"]) == -1_000_000
        assert money_of(own_gateway, team.name)[0] == 99

        # At half price the charge costs prompt × 125 + output × 500, about 1.5 credits: still more than
        # the 1 credit it collected, so nothing is owed back (it used to refund the 1.5 credits its cost
        # fell by, more than it ever collected).
        half = rerate(
            own_gateway,
            team.name,
            started.isoformat(),
            ended.isoformat(),
            prices_file(tmp_path, "half.toml", HALF),
            "--apply",
        )
        assert (half["recorded_micros"], half["collected_micros"]) == (cost, 1_000_000)
        assert half["rerated_micros"] == prompt * 125 + output * 500
        assert half["adjustment_micros"] == 0
        assert money_of(own_gateway, team.name)[0] == 99

        # At a tenth of the price it costs prompt × 25 + output × 100, about 0.3 credits: what it
        # collected beyond that is refunded, exactly. (The half-price re-rate moved nothing, so it
        # recorded nothing: this one is the first to move the period's money.)
        tenth_cost = prompt * 25 + output * 100
        tenth = rerate(
            own_gateway,
            team.name,
            started.isoformat(),
            ended.isoformat(),
            prices_file(tmp_path, "tenth.toml", TENTH),
            "--apply",
        )
        assert tenth["adjustment_micros"] == tenth["adjusted_micros"][0] == 1_000_000 - tenth_cost
        assert money_of(own_gateway, team.name)[0] == Decimal(99) + Decimal(1_000_000 - tenth_cost) / 1_000_000
        assert own_gateway.cli("ledger", "verify").returncode == 0


def test_a_re_rate_moves_a_period_s_money_once_however_it_is_spelled(own_gateway: Gateway, tmp_path: Path):
    team = new_team(own_gateway, "once", "100")
    with openai.OpenAI(base_url=own_gateway.base_url, api_key=team.key, max_retries=0) as client:
        started = datetime.now(UTC).replace(microsecond=0)
        for _ in range(3):
            client.chat.completions.create(model="fake-gpt", messages=[{"role": "user", "content": "price me"}])
        ended = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
        until_past(ended)
        cost = sum(-int(row["amount"]) for row in own_gateway.charges(team.name))
        half = prices_file(tmp_path, "half.toml", HALF)

        early = rerate(
            own_gateway, team.name, started.date().isoformat(), ended.date().isoformat(), half, "--apply", check=False
        )  # today, to its end: a period that has not ended is never applied
        assert early["code"] == 1
        assert "has not come" in early["refused"]

        applied = rerate(own_gateway, team.name, started.isoformat(), ended.isoformat(), half, "--apply")
        refund = cost - applied["rerated_micros"]
        assert refund > 0
        assert applied["adjustment_micros"] == sum(applied["adjusted_micros"]) == refund
        balance = money_of(own_gateway, team.name)[0]
        assert balance == Decimal(100) - Decimal(cost - refund) / 1_000_000

        plus_one = timezone(timedelta(hours=1))
        again = [
            # the same instants, written at +01:00
            (started.astimezone(plus_one).isoformat(), ended.astimezone(plus_one).isoformat(), half),
            # the same prices, respelled, with comments
            (started.isoformat(), ended.isoformat(), prices_file(tmp_path, "respelled.toml", HALF_RESPELLED)),
            # a longer period, overlapping the applied one, at other prices
            (
                (started - timedelta(minutes=5)).isoformat(),
                (ended + timedelta(seconds=1)).isoformat(),
                prices_file(tmp_path, "tenth.toml", TENTH),
            ),
        ]
        until_past(ended + timedelta(seconds=1))
        for start, end, prices in again:
            preview = rerate(own_gateway, team.name, start, end, prices)
            assert preview["earlier"]["reference"] == applied["reference"], preview
            refused = rerate(own_gateway, team.name, start, end, prices, "--apply", check=False)
            assert refused["code"] == 1, refused
            assert applied["reference"] in refused["refused"]
            assert "may not overlap" in refused["refused"]
            assert money_of(own_gateway, team.name)[0] == balance
        for start, end, prices in again[:2]:  # the same re-rate, by its content
            assert rerate(own_gateway, team.name, start, end, prices)["reference"] == applied["reference"]

        # The instant the applied period ends is not in it: the period from there may be re-rated.
        client.chat.completions.create(model="fake-gpt", messages=[{"role": "user", "content": "price me"}])
        later = datetime.now(UTC) + timedelta(seconds=0.1)
        until_past(later)
        after = rerate(own_gateway, team.name, ended.isoformat(), later.isoformat(), half, "--apply")
        [last] = [row for row in own_gateway.charges(team.name) if datetime.fromisoformat(row["occurred_at"]) >= ended]
        assert (
            after["adjustment_micros"]
            == sum(after["adjusted_micros"])
            == -int(last["amount"]) - after["rerated_micros"]
        )
        assert after["adjustment_micros"] > 0
        assert own_gateway.cli("ledger", "verify").returncode == 0
