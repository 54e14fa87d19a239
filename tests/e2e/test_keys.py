"""Revoking keys and restricting them to models, seen at once by every gateway process."""

from __future__ import annotations

import time
from contextlib import ExitStack

import anthropic
import openai
import pytest

from tests.support.backend import BACKEND
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def gateways(tmp_path, fake_upstream: FakeUpstream):
    config = write_config(tmp_path, fake_upstream.base_url, redis=True)
    started = [Gateway(config).start() for _ in range(2 if BACKEND == "postgresql" else 1)]
    yield started
    for g in started:
        g.stop()


def test_a_revoked_key_is_refused_at_once_by_every_process(gateways):
    first = gateways[0]
    first.cli("team", "create", "acme", "--credits", "5")
    key = first.cli("key", "create", "--team", "acme", "--name", "ci").stdout.splitlines()[-1]
    with ExitStack() as closing:
        clients = [
            closing.enter_context(openai.OpenAI(base_url=g.base_url, api_key=key, max_retries=0)) for g in gateways
        ]
        for client in clients:  # every process has the key cached
            client.chat.completions.create(model="fake-gpt", messages=HI)

        (key_id,) = [line.split()[0] for line in first.cli("key", "list", "--team", "acme").stdout.splitlines()]
        first.cli("key", "revoke", "--team", "acme", key_id)
        time.sleep(0.6)  # the projector looks every 0.25 s
        for client in clients:
            with pytest.raises(openai.AuthenticationError):
                client.chat.completions.create(model="fake-gpt", messages=HI)
        assert f"{key_id}  revoked" in first.cli("key", "list", "--team", "acme").stdout
        again = first.cli("key", "revoke", "--team", "acme", key_id, check=False)
        assert again.returncode == 1
        assert "already revoked" in again.stderr


def test_a_key_restricted_to_models_gets_403_for_others_in_each_protocol_shape(gateways):
    gateway = gateways[-1]
    gateway.cli("team", "create", "acme", "--credits", "50")
    key = gateway.cli("key", "create", "--team", "acme", "--models", "fake-gpt").stdout.splitlines()[-1]
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as client:
        client.chat.completions.create(model="fake-gpt", messages=HI)
        with pytest.raises(openai.PermissionDeniedError) as denied:
            client.chat.completions.create(model="fake-claude", messages=HI)
        assert denied.value.response.json()["error"]["type"] == "permission_error"
        with anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=key, max_retries=0) as claude:
            with pytest.raises(anthropic.PermissionDeniedError) as refused:
                claude.messages.create(model="demo-gpt", max_tokens=10, messages=HI)
            assert refused.value.body["error"]["type"] == "permission_error"

            (key_id,) = [line.split()[0] for line in gateway.cli("key", "list", "--team", "acme").stdout.splitlines()]
            gateway.cli("key", "restrict", "--team", "acme", key_id, "--models", "fake-gpt,fake-claude")
            time.sleep(0.6)
            client.chat.completions.create(model="fake-claude", messages=HI)
            unknown = gateway.cli("key", "restrict", "--team", "acme", key_id, "--models", "nope", check=False)
            assert unknown.returncode == 2
            assert "unknown model" in unknown.stderr
