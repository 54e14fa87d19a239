"""Billing as a client sees it: balances in `usage`, 402s, and failures that charge nothing."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import openai
import pytest

from app.tokens.encoding import count_o200k
from tests.support import plain_http
from tests.support.charges import HELLO, balance_of, micros
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway

pytestmark = pytest.mark.usefixtures("ledger_verified_after")


def remaining(completion) -> Decimal:
    return Decimal(str(completion.usage.model_extra["remaining"]["credits"]))


def cost(completion) -> Decimal:
    return Decimal(str(completion.usage.model_extra["cost"]["credits"]))


def test_the_remaining_balance_follows_a_sequence_of_requests(client: openai.OpenAI):
    expected = Decimal(100)
    for words, max_tokens in [("one", None), ("one two three four five", None), ("a b c d e f g", 3)]:
        completion = client.chat.completions.create(
            model="fake-gpt", messages=[{"role": "user", "content": words}], max_tokens=max_tokens
        )
        prompt, completion_tokens = completion.usage.prompt_tokens, completion.usage.completion_tokens
        assert prompt == len(words.split()) + 3
        expected -= Decimal(micros(prompt, completion_tokens)) / 1_000_000
        assert cost(completion) == Decimal(micros(prompt, completion_tokens)) / 1_000_000
        assert remaining(completion) == expected
    assert completion.choices[0].finish_reason == "length"


def test_cached_prompt_tokens_are_billed_at_the_cache_hit_price(client: openai.OpenAI):
    completion = client.chat.completions.create(
        model="fake-gpt", messages=[{"role": "user", "content": "w w w w w w [[cached:4]]"}]
    )
    assert completion.usage.prompt_tokens_details.cached_tokens == 4
    usage = completion.usage
    assert cost(completion) == Decimal(micros(usage.prompt_tokens, usage.completion_tokens, cached=4)) / 1_000_000


def test_a_team_that_cannot_afford_the_worst_case_gets_402_and_the_upstream_is_never_called(
    gateway: Gateway, teams, fake_upstream: FakeUpstream
):
    poor = teams.open("0.02")  # 20,000 micro-credits; 1,024 output tokens alone cost 1,024,000
    with openai.OpenAI(base_url=gateway.base_url, api_key=poor.key, max_retries=2) as client:
        with pytest.raises(openai.APIStatusError) as error:
            client.chat.completions.create(model="fake-gpt", messages=HELLO)
        assert error.value.status_code == 402
        assert error.value.response.headers["x-should-retry"] == "false"
        body = error.value.response.json()["error"]
        assert body["type"] == "billing_error"
        assert "Insufficient credits" in body["message"]
        assert fake_upstream.requests == []
        assert balance_of(gateway, poor.name) == Decimal("0.02")

        # A small enough max_tokens fits the balance, and is then billed at the actual usage.
        completion = client.chat.completions.create(model="fake-gpt", messages=HELLO, max_tokens=5)
        assert remaining(completion) == Decimal("0.02") - cost(completion)


def test_running_out_of_credits_turns_into_402(gateway: Gateway, teams):
    team = teams.open("0.05")  # the worst case of max_tokens=10 is ~0.0124 credits
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        served: list = []
        with pytest.raises(openai.APIStatusError) as error:
            _ask_until_refused(client, served)
        assert error.value.status_code == 402
        assert len(served) >= 3
        assert balance_of(gateway, team.name) == remaining(served[-1])


def _ask_until_refused(client: openai.OpenAI, served: list) -> None:
    """Ask (at most 100 times) until the gateway refuses, which raises; each answer served goes to ``served``."""
    for _ in range(100):
        completion = client.chat.completions.create(model="fake-gpt", messages=HELLO, max_tokens=10)
        served.append(completion)
        assert remaining(completion) >= 0


@pytest.mark.parametrize(
    ("directive", "exception"),
    [
        ("[[fail:503]]", openai.InternalServerError),
        ("[[fail:500]]", openai.InternalServerError),
        ("[[fail:429]]", openai.RateLimitError),
    ],
)
def test_an_upstream_failure_is_reported_and_charges_nothing(gateway: Gateway, team, directive, exception):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        for stream in (False, True):
            with pytest.raises(exception) as error:
                client.chat.completions.create(
                    model="fake-gpt", messages=[{"role": "user", "content": f"hi {directive}"}], stream=stream
                )
            kind = error.value.response.json()["error"]["type"]
            assert kind == ("rate_limit_error" if exception is openai.RateLimitError else "server_error")
        assert balance_of(gateway, team.name) == 100


def test_an_unreachable_upstream_is_a_502_that_charges_nothing(gateway: Gateway, team):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        with pytest.raises(openai.InternalServerError) as error:
            client.chat.completions.create(model="dead-gpt", messages=HELLO)
        assert error.value.status_code == 502
        assert error.value.response.json()["error"]["type"] == "server_error"
        assert balance_of(gateway, team.name) == 100


def test_a_stream_the_upstream_breaks_ends_with_an_error_and_bills_only_what_was_delivered(gateway: Gateway, team):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        stream = client.chat.completions.create(
            model="fake-gpt", messages=[{"role": "user", "content": "one two three four [[drop-after:2]]"}], stream=True
        )
        received: list = []
        with pytest.raises(openai.APIError):
            received.extend(stream)  # keeps the chunks that came before the break
        assert len(received) == 3  # the role chunk and two content chunks
        spent = 100 - balance_of(gateway, team.name)
        assert 0 < spent < Decimal("0.2")


def test_an_upstream_without_usage_is_billed_from_the_gateway_s_own_count(client: openai.OpenAI):
    completion = client.chat.completions.create(
        model="fake-gpt", messages=[{"role": "user", "content": "hi [[no-usage]]"}]
    )
    assert completion.usage.completion_tokens == count_o200k("Echo: hi") == 3  # the text's exact o200k tokens
    assert completion.usage.prompt_tokens == 3 + 1 + count_o200k("hi [[no-usage]]") + 3  # the gateway's count
    assert cost(completion) > 0
    assert remaining(completion) == 100 - cost(completion)


async def test_concurrent_requests_never_overspend(gateway: Gateway, teams):
    team = teams.open("0.1")  # affords about 8 worst-case holds at max_tokens=10
    async with openai.AsyncOpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:

        async def one(i: int):
            try:
                return await client.chat.completions.create(
                    model="fake-gpt",
                    messages=[{"role": "user", "content": f"request {i}"}],
                    max_tokens=10,
                    stream=i % 2 == 0,
                    **({"stream_options": {"include_usage": True}} if i % 2 == 0 else {}),
                )
            except openai.APIStatusError as exc:
                return exc.status_code

        results = await asyncio.gather(*(one(i) for i in range(40)))
        statuses = [r for r in results if isinstance(r, int)]
        assert set(statuses) <= {402}, statuses
        assert statuses, statuses
        charged = Decimal(0)
        for r in results:
            if isinstance(r, int):
                continue
            if hasattr(r, "__aiter__"):
                chunks = [c async for c in r]
                r = chunks[-1]
            charged += cost(r)
        final = balance_of(gateway, team.name)
        assert final >= 0
        assert final == Decimal("0.1") - charged
        await client.close()


def test_ledger_verify_passes_after_traffic(gateway: Gateway, client: openai.OpenAI):
    client.chat.completions.create(model="fake-gpt", messages=HELLO)
    result = gateway.cli("ledger", "verify")
    assert result.returncode == 0
    assert "every recorded balance matches" in result.stdout


def test_a_restarted_gateway_reports_the_same_balance(tmp_path, fake_upstream: FakeUpstream):
    from tests.support.gateway import write_config
    from tests.support.teams import Teams

    config = write_config(tmp_path, fake_upstream.base_url)
    gateway = Gateway(config).start()
    teams = Teams(config)
    team = teams.open("10")
    teams.close()
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        before = remaining(client.chat.completions.create(model="fake-gpt", messages=HELLO))
        gateway.stop()

        gateway.start()
        try:
            after = client.chat.completions.create(model="fake-gpt", messages=HELLO)
            assert remaining(after) == before - cost(after)
            assert balance_of(gateway, team.name) == remaining(after)
        finally:
            gateway.stop()


def test_a_client_that_disconnects_mid_stream_leaves_no_open_hold(gateway: Gateway, team):
    import time

    words = " ".join(f"w{i}" for i in range(300))
    with plain_http.stream(
        "POST",
        gateway.base_url + "/chat/completions",
        headers={"Authorization": f"Bearer {team.key}"},
        json={"model": "fake-gpt", "messages": [{"role": "user", "content": words}], "stream": True},
    ) as response:
        for line in response.iter_lines():  # hang up as soon as some text has arrived
            if '"content":"Echo' in line:
                break
    deadline = time.monotonic() + 10
    while True:
        shown = gateway.cli("team", "show", team.name).stdout
        if "held 0," in shown or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert "held 0," in shown
    assert balance_of(gateway, team.name) < 100  # what was delivered is paid for


def test_a_client_that_gives_up_before_the_upstream_answers_leaves_no_open_hold(gateway: Gateway, team):
    import time

    import httpx

    with pytest.raises(httpx.ReadTimeout):
        plain_http.post(
            gateway.base_url + "/chat/completions",
            headers={"Authorization": f"Bearer {team.key}"},
            json={
                "model": "fake-gpt",
                "messages": [{"role": "user", "content": "slow [[latency:1500]]"}],
                "stream": True,
            },
            timeout=0.3,
        )
    deadline = time.monotonic() + 10
    while "held 0," not in (shown := gateway.cli("team", "show", team.name).stdout) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "held 0," in shown
