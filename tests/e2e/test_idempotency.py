"""Idempotency-Key: a retried request gets the original answer and is charged once."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from decimal import Decimal

import anthropic
import httpx
import openai
import pytest

from app.store.housekeeping import purge_expired_answers
from tests.support import plain_http
from tests.support.backend import BACKEND, RawDatabase
from tests.support.charges import balance_of
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config

HI = [{"role": "user", "content": "hello idempotent world"}]


def post(gateway: Gateway, team, body: dict, key: str | None, path: str = "/chat/completions") -> httpx.Response:
    headers = {"Authorization": f"Bearer {team.key}"} | ({"Idempotency-Key": key} if key else {})
    return plain_http.post(gateway.base_url + path, headers=headers, json=body, timeout=30)


def test_a_retry_gets_the_same_answer_and_is_not_charged_again(gateway: Gateway, team, fake_upstream: FakeUpstream):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        first = client.chat.completions.with_raw_response.create(
            model="fake-gpt", messages=HI, extra_headers={"Idempotency-Key": "order-1"}
        )
        again = client.chat.completions.with_raw_response.create(
            model="fake-gpt", messages=HI, extra_headers={"Idempotency-Key": "order-1"}
        )
        assert again.http_response.content == first.http_response.content
        assert again.headers["idempotent-replayed"] == "true"
        assert again.headers["x-request-id"] == first.headers["x-request-id"]
        assert len(fake_upstream.requests) == 1
        cost = Decimal(str(first.parse().usage.model_extra["cost"]["credits"]))
        assert balance_of(gateway, team.name) == 100 - cost


def test_a_streamed_answer_is_replayed_whole(gateway: Gateway, team, fake_upstream: FakeUpstream):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        args = {
            "model": "fake-claude",
            "messages": HI,
            "stream": True,
            "stream_options": {"include_usage": True},
            "extra_headers": {"Idempotency-Key": "stream-1"},
        }
        first = list(client.chat.completions.create(**args))
        again = list(client.chat.completions.create(**args))
        assert [c.model_dump() for c in again] == [c.model_dump() for c in first]
        assert len(fake_upstream.requests) == 1
        assert balance_of(gateway, team.name) == 100 - Decimal(str(first[-1].usage.model_extra["cost"]["credits"]))


def test_the_same_key_for_a_different_body_is_a_409(gateway: Gateway, team):
    assert post(gateway, team, {"model": "fake-gpt", "messages": HI}, "k-409").status_code == 200
    other = post(gateway, team, {"model": "fake-gpt", "messages": [{"role": "user", "content": "else"}]}, "k-409")
    assert other.status_code == 409
    assert other.json()["error"]["type"] == "invalid_request_error"
    with anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0) as claude:
        claude.messages.create(model="fake-gpt", max_tokens=20, messages=HI, extra_headers={"Idempotency-Key": "m-409"})
        with pytest.raises(anthropic.ConflictError) as conflict:
            claude.messages.create(
                model="fake-gpt", max_tokens=21, messages=HI, extra_headers={"Idempotency-Key": "m-409"}
            )
        assert conflict.value.body["type"] == "error"


def test_a_retry_while_the_first_attempt_runs_is_a_409(gateway: Gateway, team):
    slow = {"model": "fake-gpt", "messages": [{"role": "user", "content": "slow [[latency:1500]]"}]}
    results = {}
    first = threading.Thread(target=lambda: results.setdefault("first", post(gateway, team, slow, "k-busy")))
    first.start()
    time.sleep(0.5)
    busy = post(gateway, team, slow, "k-busy")
    first.join()
    assert busy.status_code == 409
    assert "in progress" in busy.json()["error"]["message"]
    assert results["first"].status_code == 200
    assert post(gateway, team, slow, "k-busy").content == results["first"].content


def test_a_failed_attempt_stores_nothing_and_can_be_retried(gateway: Gateway, team):
    body = {"model": "dead-gpt", "messages": HI}
    assert post(gateway, team, body, "k-fail").status_code == 502
    assert post(gateway, team, body, "k-fail").status_code == 502  # run again, not replayed, not 409
    assert balance_of(gateway, team.name) == 100


def test_requests_without_a_key_get_an_id_the_ledger_records(gateway: Gateway, team):
    response = post(gateway, team, {"model": "fake-gpt", "messages": HI}, None)
    request_id = response.headers["x-request-id"]
    rows = [
        json.loads(line)
        for line in gateway.cli("ledger", "export", "--team", team.name, "--format", "jsonl").stdout.splitlines()
    ]
    assert [r["request_id"] for r in rows if r["kind"] == "charge"] == [request_id]


async def test_concurrent_retries_across_processes_are_charged_once(tmp_path, fake_upstream: FakeUpstream):
    config = write_config(tmp_path, fake_upstream.base_url, redis=True)
    gateways = [Gateway(config).start() for _ in range(2 if BACKEND == "postgresql" else 1)]
    try:
        gateways[0].cli("team", "create", "acme", "--credits", "10")
        key = gateways[0].cli("key", "create", "--team", "acme").stdout.splitlines()[-1]
        body = {"model": "fake-gpt", "messages": [{"role": "user", "content": "once [[latency:300]]"}]}
        async with plain_http.AsyncClient(timeout=30) as http:
            responses = await asyncio.gather(
                *(
                    http.post(
                        gateways[i % len(gateways)].base_url + "/chat/completions",
                        json=body,
                        headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "same"},
                    )
                    for i in range(12)
                )
            )
        statuses = sorted(r.status_code for r in responses)
        assert set(statuses) <= {200, 409}
        assert 200 in statuses
        answers = {r.content for r in responses if r.status_code == 200}
        assert len(answers) == 1  # every 200 is the one answer
        cost = Decimal(str(json.loads(answers.pop())["usage"]["cost"]["credits"]))
        assert balance_of(gateways[0], "acme") == 10 - cost
        assert gateways[0].cli("ledger", "verify").returncode == 0
    finally:
        for g in gateways:
            g.stop()


def test_an_answer_expires_and_a_retry_after_that_is_a_new_request(tmp_path, fake_upstream: FakeUpstream):
    config = write_config(tmp_path, fake_upstream.base_url, settings="idempotency_ttl = 2")
    gateway = Gateway(config).start()
    try:
        gateway.cli("team", "create", "acme", "--credits", "10")
        team = type("T", (), {"key": gateway.cli("key", "create", "--team", "acme").stdout.splitlines()[-1]})
        body = {"model": "fake-gpt", "messages": HI}
        first = post(gateway, team, body, "k-ttl")
        again = post(gateway, team, body, "k-ttl")
        assert again.headers["idempotent-replayed"] == "true"
        assert again.content == first.content
        time.sleep(2.5)
        later = post(gateway, team, body, "k-ttl")  # the stored answer has expired (not yet purged)
        assert later.status_code == 200
        assert "idempotent-replayed" not in later.headers
        assert later.headers["x-request-id"] != first.headers["x-request-id"]
        assert len(fake_upstream.requests) == 2
        charged = [c["request_id"] for c in gateway.charges("acme")]
        assert sorted(charged) == sorted([first.headers["x-request-id"], later.headers["x-request-id"]])
        assert post(gateway, team, body, "k-ttl").content == later.content  # the new answer is replayed now

        time.sleep(2.5)
        database = RawDatabase.of_config(config)
        assert database.execute("SELECT COUNT(*) FROM idempotency_keys")[0][0] == 1
        assert purge_expired_answers(database.db) == 1
        assert database.execute("SELECT COUNT(*) FROM idempotency_keys")[0][0] == 0
        assert gateway.cli("ledger", "verify").returncode == 0
    finally:
        gateway.stop()
