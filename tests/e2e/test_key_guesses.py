"""Failed key attempts are throttled per client address, through real gateways: past its budget an
address gets 429 with Retry-After (in the endpoint's shape) for keys it would otherwise have had
looked up or compared — the admin key too — while a team key already served goes on, and other
addresses are not touched. With redis_url the budget is shared by every process.

The gateway trusts X-Forwarded-For from 127.0.0.1 (uvicorn's default, for a proxy in front of it), so
each test speaks for addresses of its own."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway, write_config
from tests.support.teams import Teams

BUDGET = 5
CHAT = {"model": "fake-gpt", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    config = write_config(
        tmp_path_factory.mktemp("key-guesses"), fake_upstream.base_url, key_failures_per_minute=BUDGET
    )
    gw = Gateway(config).start()
    yield gw
    gw.stop()


def chat(gateway: Gateway, key: str, address: str) -> httpx.Response:
    return plain_http.post(
        f"{gateway.base_url}/chat/completions",
        json=CHAT,
        headers={"authorization": f"Bearer {key}", "x-forwarded-for": address},
    )


def test_an_address_that_spent_its_failed_attempts_gets_429_and_valid_keys_already_served_go_on(guarded: Gateway):
    teams = Teams(guarded.config)
    served, fresh = teams.open(), teams.open()
    teams.close()
    guesser, neighbour = "203.0.113.7", "198.51.100.9"
    assert chat(guarded, served.key, guesser).status_code == 200  # a key the gateway has served

    for i in range(BUDGET):
        assert chat(guarded, f"tg-guess-{i}", guesser).status_code == 401
    throttled = chat(guarded, "tg-guess-next", guesser)
    assert throttled.status_code == 429
    assert 1 <= int(throttled.headers["retry-after"]) <= 60 // BUDGET
    assert throttled.headers["x-should-retry"] == "false"
    assert throttled.json()["error"]["type"] == "rate_limit_error"

    with anthropic.Anthropic(
        base_url=guarded.root_url, api_key="tg-guess-again", max_retries=0, default_headers={"x-forwarded-for": guesser}
    ) as messages:
        with pytest.raises(anthropic.RateLimitError) as refused:
            messages.messages.create(model="fake-gpt", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        assert refused.value.body["type"] == "error"
        admin = plain_http.get(
            f"{guarded.root_url}/admin/teams",
            headers={"authorization": f"Bearer {ADMIN_KEY}", "x-forwarded-for": guesser},
        )
        assert admin.status_code == 429  # the admin key is never compared for an address over its budget

        assert chat(guarded, served.key, guesser).status_code == 200  # never slowed
        assert chat(guarded, fresh.key, guesser).status_code == 429  # a key new to the gateway waits for the budget
        assert chat(guarded, fresh.key, neighbour).status_code == 200  # another address is untouched
        assert chat(guarded, "tg-guess-elsewhere", neighbour).status_code == 401


def test_the_sdk_does_not_retry_a_throttled_wrong_key(guarded: Gateway):
    sent: list[httpx.Request] = []
    with (
        plain_http.Client(event_hooks={"request": [sent.append]}) as http,  # the SDK leaves a client it was given open
        openai.OpenAI(
            base_url=guarded.base_url,
            api_key="tg-guess",
            max_retries=3,
            default_headers={"x-forwarded-for": "192.0.2.44"},
            http_client=http,
        ) as client,
    ):
        for _ in range(BUDGET):
            with pytest.raises(openai.AuthenticationError):
                client.chat.completions.create(**CHAT)
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(**CHAT)
    assert len(sent) == BUDGET + 1  # the SDK obeys x-should-retry: false, and asks once


def test_the_budget_is_shared_by_every_process_with_redis(tmp_path, fake_upstream: FakeUpstream):
    config = write_config(tmp_path, fake_upstream.base_url, redis=True, key_failures_per_minute=BUDGET)
    gateways = [Gateway(config).start() for _ in range(2)]
    try:
        address = "203.0.113.99"
        for i in range(BUDGET):
            assert chat(gateways[i % 2], f"tg-guess-{i}", address).status_code == 401
        assert [chat(g, "tg-guess-more", address).status_code for g in gateways] == [429, 429]
    finally:
        for g in gateways:
            g.stop()
