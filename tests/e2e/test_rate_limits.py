"""Rate limits per key and per team, as the SDKs meet them: 429 ``rate_limit_error`` with
``Retry-After``, and the ``x-ratelimit-*`` headers on every admitted request's answer — kept in
memory by a lone gateway, and in Redis across gateway processes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from contextlib import ExitStack

import anthropic
import openai
import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, GATEWAY_ENV, Gateway, free_port, tollgate_command, write_config

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

HI = [{"role": "user", "content": "hi"}]


def gateway_database_url(gateway: Gateway) -> str:
    """The session gateway's database, as a URL another config directory can use."""
    line = next(line for line in gateway.config.read_text().splitlines() if line.startswith("database_url"))
    url = line.split("=", 1)[1].strip().strip('"')
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        url = f"sqlite:///{gateway.config.parent / url.removeprefix('sqlite:///')}"
    return url


def new_key(gateway: Gateway, team: str, *options: str, balance: str = "50") -> str:
    gateway.cli("team", "create", team, "--credits", balance)
    return gateway.cli("key", "create", "--team", team, *options).stdout.splitlines()[-1]


@pytest.fixture(scope="module")
def shared_gateways(tmp_path_factory, fake_upstream: FakeUpstream):
    """Two gateway processes on one ledger, sharing their rate limits through Redis."""
    config = write_config(tmp_path_factory.mktemp("shared"), fake_upstream.base_url, redis=True)
    started = [Gateway(config).start() for _ in range(2)]
    yield started
    for g in started:
        g.stop()


@pytest.fixture(params=["memory", "redis"])
def gateway_kind(request, gateway: Gateway):
    """The session gateway keeps its limits in memory; the shared ones in Redis."""
    return gateway if request.param == "memory" else request.getfixturevalue("shared_gateways")[0]


def test_a_key_over_its_requests_per_minute_gets_429_with_retry_after(gateway_kind: Gateway, request):
    key = new_key(gateway_kind, f"rpm-{request.node.callspec.id}", "--rpm", "3")
    with openai.OpenAI(base_url=gateway_kind.base_url, api_key=key, max_retries=0) as client:
        remaining = []
        for _ in range(3):
            raw = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=HI)
            assert raw.headers["x-ratelimit-limit-requests"] == "3"
            assert raw.headers["x-ratelimit-reset-requests"].endswith("s")
            remaining.append(int(raw.headers["x-ratelimit-remaining-requests"]))
        assert remaining == [2, 1, 0]
        with pytest.raises(openai.RateLimitError) as refused:
            client.chat.completions.create(model="fake-gpt", messages=HI)
        error = refused.value
        assert error.status_code == 429
        assert error.body["type"] == "rate_limit_error"
        assert 1 <= int(error.response.headers["retry-after"]) <= 20  # one request refills in 20 s at 3/min
        assert error.response.headers["x-ratelimit-remaining-requests"] == "0"
        assert error.response.headers["x-should-retry"] == "true"


def test_the_messages_endpoint_refuses_in_its_own_shape(gateway: Gateway):
    key = new_key(gateway, "rpm-messages", "--rpm", "1")
    with anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=key, max_retries=0) as claude:
        claude.messages.create(model="fake-claude", max_tokens=20, messages=HI)
        with pytest.raises(anthropic.RateLimitError) as refused:
            claude.messages.create(model="fake-claude", max_tokens=20, messages=HI)
        assert refused.value.body == {
            "type": "error",
            "error": {
                "type": "rate_limit_error",  # type: ignore[comparison-overlap]
                "message": refused.value.body["error"]["message"],
            },
        }
        assert "retry-after" in refused.value.response.headers


def test_a_team_limit_is_shared_by_all_its_keys_and_set_through_the_admin_api(gateway: Gateway):
    with plain_http.Client(
        base_url=gateway.base_url.removesuffix("/v1") + "/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ) as admin:
        assert admin.post("/teams", json={"name": "team-rpm", "credits": "20", "rpm": 2}).json()["rpm"] == 2
        keys = [admin.post("/teams/team-rpm/keys", json={}).json()["key"] for _ in range(2)]
        with ExitStack() as closing:
            clients = [
                closing.enter_context(openai.OpenAI(base_url=gateway.base_url, api_key=k, max_retries=0)) for k in keys
            ]
            clients[0].chat.completions.create(model="fake-gpt", messages=HI)
            clients[1].chat.completions.create(model="fake-gpt", messages=HI)
            with pytest.raises(openai.RateLimitError) as refused:
                clients[0].chat.completions.create(model="fake-gpt", messages=HI)
            assert "team" in refused.value.message
            # Lifting it (0 = no limit) takes effect at once in this process.
            assert admin.put("/teams/team-rpm/limits", json={"rpm": 0}).json()["rpm"] is None
            clients[1].chat.completions.create(model="fake-gpt", messages=HI)
            key_id = admin.get("/teams/team-rpm/keys").json()["data"][0]["id"]
            limited = admin.put(f"/teams/team-rpm/keys/{key_id}/limits", json={"tpm": 5000})
            assert limited.json() == {"id": key_id, "rpm": None, "tpm": 5000}


def test_tokens_are_estimated_at_admission_and_corrected_by_the_usage(gateway: Gateway):
    key = new_key(gateway, "tpm-corrected", "--tpm", "1000")
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as client:
        first = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=HI, max_tokens=400)
        assert first.headers["x-ratelimit-limit-tokens"] == "1000"
        admitted_with = 1000 - int(first.headers["x-ratelimit-remaining-tokens"])
        assert admitted_with >= 400  # the prompt's count and the whole output allowance
        used = first.parse().usage.total_tokens
        assert used < 50
        time.sleep(0.2)  # the correction is applied just after the answer
        second = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=HI, max_tokens=400)
        # Had the first estimate stood, this would be 1000 - 2 × estimate (or a 429); it was corrected to
        # what was used (the bucket also refilled a little meanwhile).
        assert int(second.headers["x-ratelimit-remaining-tokens"]) >= 1000 - used - admitted_with
        assert int(second.headers["x-ratelimit-remaining-tokens"]) <= 1000 - admitted_with + 20


def test_a_request_larger_than_the_token_limit_is_refused_for_good(gateway: Gateway):
    key = new_key(gateway, "tpm-small", "--tpm", "100")
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as client:
        with pytest.raises(openai.RateLimitError) as refused:
            client.chat.completions.create(model="fake-gpt", messages=HI, max_tokens=500)
        assert "Request too large" in refused.value.message
        assert refused.value.response.headers["x-should-retry"] == "false"
        client.chat.completions.create(model="fake-gpt", messages=HI, max_tokens=20)


def test_a_refused_request_is_not_charged_and_streams_carry_the_headers(gateway: Gateway):
    key = new_key(gateway, "rpm-stream", "--rpm", "1", balance="5")
    before = gateway.wait_until_nothing_held("rpm-stream")
    body = {"model": "fake-gpt", "messages": HI, "stream": True}
    with plain_http.Client(timeout=30) as http:
        with http.stream(
            "POST", gateway.base_url + "/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}
        ) as streamed:
            assert streamed.headers["x-ratelimit-remaining-requests"] == "0"
            assert b"[DONE]" in streamed.read()
        after_one = gateway.wait_until_nothing_held("rpm-stream")
        assert after_one != before
        refused = http.post(
            gateway.base_url + "/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}
        )
        assert refused.status_code == 429
        assert refused.json()["error"]["type"] == "rate_limit_error"
        assert gateway.wait_until_nothing_held("rpm-stream") == after_one


async def _sixteen_requests(clients: list[openai.AsyncOpenAI]) -> list[int]:
    """Sixteen requests at once, over the two gateways in turn: each one's status."""

    async def one(i: int) -> int:
        try:
            await clients[i % 2].chat.completions.create(model="fake-gpt", messages=HI)
            return 200
        except openai.RateLimitError:
            return 429

    return list(await asyncio.gather(*(one(i) for i in range(16))))


async def test_limits_hold_across_two_gateway_processes_sharing_redis(shared_gateways: list[Gateway]):
    key = new_key(shared_gateways[0], "rpm-shared", "--rpm", "6")
    async with (
        openai.AsyncOpenAI(base_url=shared_gateways[0].base_url, api_key=key, max_retries=0) as first,
        openai.AsyncOpenAI(base_url=shared_gateways[1].base_url, api_key=key, max_retries=0) as second,
    ):
        statuses = await _sixteen_requests([first, second])
    # 6 per minute in all, not 6 per process (a 7th may refill if the run is slow: 1 per 10 s).
    assert statuses.count(200) in (6, 7)
    assert statuses.count(429) == 16 - statuses.count(200)
    ledger = shared_gateways[0].cli("ledger", "verify")
    assert ledger.returncode == 0


def test_a_second_gateway_without_redis_refuses_to_start_beside_the_first(gateway: Gateway):
    second = subprocess.run(
        [*tollgate_command(), "serve", "--config", str(gateway.config), "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **GATEWAY_ENV},
    )
    assert second.returncode == 2
    assert "another gateway process serves this database" in second.stderr
    assert "redis_url" in second.stderr


def test_a_gateway_with_redis_refuses_to_start_beside_one_without(
    tmp_path, fake_upstream: FakeUpstream, gateway: Gateway
):
    database = gateway_database_url(gateway)
    shared = write_config(tmp_path, fake_upstream.base_url, database=database, redis=True)
    refused = subprocess.run(
        [*tollgate_command(), "serve", "--config", str(shared), "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **GATEWAY_ENV},
    )
    assert refused.returncode == 2
    assert "without redis_url" in refused.stderr


def test_count_tokens_is_one_request_against_the_key_s_and_the_team_s_rpm(gateway: Gateway):
    """Counting a prompt costs CPU, so it is rate limited like any request (Messages shape, with
    Retry-After); it generates nothing, so it takes nothing from the tpm limits."""
    key = new_key(gateway, f"count-rpm-{os.getpid()}", "--rpm", "2", "--tpm", "50")
    with anthropic.Anthropic(base_url=gateway.root_url, api_key=key, max_retries=0) as client:
        big = [{"role": "user", "content": "word " * 200}]  # 200 tokens: far over the tpm if it were counted
        for remaining in ("1", "0"):
            raw = client.messages.with_raw_response.count_tokens(model="fake-claude", messages=big)
            assert raw.parse().input_tokens > 50
            assert raw.headers["x-ratelimit-remaining-requests"] == remaining
        with pytest.raises(anthropic.RateLimitError) as refused:
            client.messages.count_tokens(model="fake-claude", messages=big)
        body = refused.value.response.json()
        assert body["type"] == "error"
        assert body["error"]["type"] == "rate_limit_error"
        assert int(refused.value.response.headers["retry-after"]) >= 1


def test_count_tokens_takes_from_the_team_s_rpm_shared_by_its_keys(gateway: Gateway):
    team = f"count-team-{os.getpid()}"
    gateway.cli("team", "create", team, "--credits", "5", "--rpm", "1")
    keys = [gateway.cli("key", "create", "--team", team).stdout.splitlines()[-1] for _ in range(2)]
    with anthropic.Anthropic(base_url=gateway.root_url, api_key=keys[0], max_retries=0) as first:
        first.messages.count_tokens(model="fake-claude", messages=HI)
        with (
            pytest.raises(anthropic.RateLimitError),
            anthropic.Anthropic(base_url=gateway.root_url, api_key=keys[1], max_retries=0) as sdk,
        ):
            sdk.messages.create(model="fake-claude", max_tokens=5, messages=HI)
