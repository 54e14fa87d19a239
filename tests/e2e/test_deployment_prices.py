"""Prices that follow where a request was served: a deployment with a price of its own (a dearer
region, say) is charged at it, the answer's ``usage.cost.price_ref`` names its entry in the price
list (``MODEL/NAME@VERSION``), a hold reserves the dearest price any deployment could serve at, a
failover charges the deployment that answered, and ``tollgate ledger verify`` checks each charge
against the entry its ref names.

Prices (100 credits per USD): regional-gpt at $1/M in and out; its `eu` deployment at $1.10/M
(10 % dearer); its `us` deployment has no price of its own. "hello there gateway" is 6 prompt
tokens on the fake chat upstream and its echo 4: 10 tokens, 1,000 micro-credits at the model's
price, 1,100 at eu's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.support.charges import charged, reported
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, verified_gateway, write_config
from tests.support.teams import Team, Teams, teams_of

HI = [{"role": "user", "content": "hello there gateway"}]
PRICE = "{input = 1, output = 1, cache_create = 1.25, cache_hit = 0.1}"
EU_PRICE = "{input = 1.1, output = 1.1, cache_create = 1.375, cache_hit = 0.11}"


def _model(model_id: str, deployments: list[str]) -> str:
    return f"""
[[models]]
id = "{model_id}"
display_name = "{model_id}"
owned_by = "test"
context_window = 100000
max_output_tokens = 4096
pricing = {PRICE}
upstreams = [{", ".join(deployments)}]
"""


def config_with_regions(directory: Path, base: str) -> Path:
    config = write_config(directory, base)
    down = base.replace("/v1", "/status/503/v1")
    dep = 'kind = "openai", api_key_env = "UPSTREAM_KEY", model = "gpt-x"'
    eu = f'{{{dep}, base_url = "{base}", name = "eu", pricing = {EU_PRICE}'
    us = f'{{{dep}, base_url = "{base}", name = "us"'
    models = [
        _model("eu-only-gpt", [eu + "}"]),
        _model("us-only-gpt", [us + "}"]),
        # the eu deployment is down before answering: its price must not be what is charged
        _model(
            "failover-gpt", [eu.replace(f'base_url = "{base}"', f'base_url = "{down}"') + ", weight = 1000}", us + "}"]
        ),
        _model(
            "us-down-gpt", [us.replace(f'base_url = "{base}"', f'base_url = "{down}"') + ", weight = 1000}", eu + "}"]
        ),
    ]
    config.write_text(config.read_text() + "".join(models))
    return config


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    yield from verified_gateway(config_with_regions(tmp_path_factory.mktemp("regions"), fake_upstream.base_url))


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def ask(gateway: Gateway, team: Team, model: str, **extra: object) -> openai.types.chat.ChatCompletion:
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        return client.chat.completions.create(model=model, messages=HI, **extra)  # type: ignore[arg-type,call-overload,no-any-return]


def price_ref(answer: openai.types.chat.ChatCompletion) -> str:
    assert answer.usage is not None
    return str(answer.usage.model_extra["cost"]["price_ref"])  # type: ignore[index]


@pytest.mark.parametrize(
    ("model", "micros", "ref"),
    [
        ("eu-only-gpt", 1100, "eu-only-gpt/eu@"),  # its own price
        ("us-only-gpt", 1000, "us-only-gpt@"),  # the model's
        ("failover-gpt", 1000, "failover-gpt@"),  # eu failed before answering; us served, at the model's price
        ("us-down-gpt", 1100, "us-down-gpt/eu@"),  # us failed; eu served, at its own
    ],
)
def test_the_charge_is_at_the_price_of_the_deployment_that_answered(
    gateway: Gateway, teams: Teams, model: str, micros: int, ref: str
):
    team = teams.open("100")
    answer = ask(gateway, team, model)
    assert answer.choices[0].message.content == "Echo: hello there gateway"
    assert reported(answer.usage) == micros
    assert charged(gateway, team) == [micros]
    assert price_ref(answer).startswith(ref)


def test_a_hold_reserves_the_dearest_price_a_request_could_be_served_at(gateway: Gateway, teams: Teams):
    """1,000 output tokens: 0.1 credits' worth at the model's price, 0.11 at eu's. A team with
    0.105 credits can afford the first, not the second, and us-down-gpt may be served by eu."""
    team = teams.open("0.105")
    with pytest.raises(openai.APIStatusError) as refused:
        ask(gateway, team, "us-down-gpt", max_tokens=1000)
    assert refused.value.status_code == 402
    assert ask(gateway, team, "us-only-gpt", max_tokens=1000).choices[0].message.content  # no eu: it fits
    gateway.wait_until_nothing_held(team.name)
    assert charged(gateway, team) == [1000]
