"""Liveness and readiness, and what the gateway does while its ledger cannot be written: the
database is really made unreachable (PostgreSQL refuses the gateway's connections; SQLite's write
lock is held by another process), and readiness must flip, generation must answer 503 without
calling the upstream, and both must come back when the database does."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.outages import database_stopped, wait_for
from tests.support.teams import Teams


@pytest.fixture(scope="module")
def own_gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    gateway = Gateway(write_config(tmp_path_factory.mktemp("health"), fake_upstream.base_url)).start()
    yield gateway
    gateway.stop()


def test_live_and_ready_when_all_is_well(own_gateway: Gateway):
    live = plain_http.get(own_gateway.root_url + "/health/live")
    ready = plain_http.get(own_gateway.root_url + "/health/ready")
    assert live.status_code == 200
    assert live.json() == {"status": "live"}
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "checks": {
            "event_store": "ok",
            "writer": "running",
            "heartbeat": "ok",
            "accepting": "yes",
            "history_projection": "current",
            "quarantined_events": "0",
        },
    }


def test_an_unwritable_ledger_turns_readiness_and_generation_to_503_and_back(
    own_gateway: Gateway, fake_upstream: FakeUpstream
):
    teams = Teams(own_gateway.config)
    team = teams.open("100")
    teams.close()
    with (
        openai.OpenAI(base_url=own_gateway.base_url, api_key=team.key, max_retries=0) as client,
        anthropic.Anthropic(base_url=own_gateway.root_url, api_key=team.key, max_retries=0) as claude,
    ):
        ask = [{"role": "user", "content": "hello"}]
        client.chat.completions.create(model="fake-gpt", messages=ask)  # a lease is held in memory from here on
        ready_url = own_gateway.root_url + "/health/ready"

        with database_stopped(own_gateway):
            wait_for(lambda: plain_http.get(ready_url).status_code == 503)
            ready = plain_http.get(ready_url).json()
            assert ready["status"] == "unavailable"
            assert ready["checks"]["event_store"] != "ok"
            fake_upstream.clear()
            with pytest.raises(openai.APIStatusError) as chat:
                client.chat.completions.create(model="fake-gpt", messages=ask)
            assert chat.value.status_code == 503
            assert "ledger cannot be written" in chat.value.message
            with pytest.raises(anthropic.APIStatusError) as messages:
                claude.messages.create(model="fake-claude", max_tokens=50, messages=ask)
            assert messages.value.status_code == 503
            assert messages.value.body["type"] == "error"  # the Messages endpoint's own shape
            assert fake_upstream.requests == []  # nothing was served that could not be billed
            assert plain_http.get(own_gateway.root_url + "/health/live").status_code == 200

        wait_for(lambda: plain_http.get(ready_url).status_code == 200)
        answer = client.chat.completions.create(model="fake-gpt", messages=ask)
        assert answer.usage.model_extra["cost"]["credits"] > 0
        own_gateway.wait_until_nothing_held(team.name)
        verify = own_gateway.cli("ledger", "verify", check=False)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        # the operator sees when it happened, and when it ended
        messages_logged = [
            line["message"] for line in own_gateway.log_lines() if line.get("logger") == "tollgate.health"
        ]
        assert any(m.startswith("the ledger cannot be written") for m in messages_logged)
        assert "the ledger can be written again; serving" in messages_logged
