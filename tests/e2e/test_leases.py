"""Credit leases: a request costs one durable write (its charge), the lease is given back when idle
or when the gateway stops, and a team is still refused before any overspend."""

from __future__ import annotations

import re
from decimal import Decimal

import openai
import pytest

from tests.support.charges import balance_of
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

HI = [{"role": "user", "content": "hello"}]


def events_in(gateway: Gateway) -> int:
    line = gateway.cli("ledger", "verify").stdout
    return int(re.search(r"verified: (\d+) events", line).group(1))  # type: ignore[union-attr]


def test_each_request_is_one_durable_write(gateway: Gateway, team):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        client.chat.completions.create(model="fake-gpt", messages=HI, max_tokens=20)  # the lease is taken
        before = events_in(gateway)
        for _ in range(20):
            client.chat.completions.create(model="fake-gpt", messages=HI, max_tokens=20)
        # 20 charges; at most a few lease events besides (growth, or a return if the run was slow).
        assert 20 <= events_in(gateway) - before <= 23
        gateway.wait_until_nothing_held(team.name)  # idle: the lease went back to the team


def test_a_stopping_gateway_gives_its_leases_back(tmp_path, fake_upstream: FakeUpstream):
    config = write_config(tmp_path, fake_upstream.base_url)
    config.write_text(config.read_text().replace("lease_idle_seconds = 0.3", "lease_idle_seconds = 60"))
    gateway = Gateway(config).start()
    gateway.cli("team", "create", "leasing", "--credits", "10")
    key = gateway.cli("key", "create", "--team", "leasing").stdout.splitlines()[-1]
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as client:
        answer = client.chat.completions.create(model="fake-gpt", messages=HI, max_tokens=20)
        assert "held 0," not in gateway.cli("team", "show", "leasing").stdout  # the lease is held
        gateway.stop()
        shown = gateway.cli("team", "show", "leasing").stdout
        assert "held 0," in shown
        assert balance_of(gateway, "leasing") == 10 - Decimal(str(answer.usage.model_extra["cost"]["credits"]))


def test_a_lease_never_lets_a_team_spend_what_it_does_not_have(gateway: Gateway, teams):
    team = teams.open("0.1")  # five worst cases at max_tokens=20 (0.02 credits each); about 15 real costs
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        served, refused = 0, []
        for _ in range(40):
            try:
                client.chat.completions.create(model="fake-gpt", messages=HI, max_tokens=20)
                served += 1
            except openai.APIStatusError as exc:
                refused.append(exc.status_code)
        assert served
        assert refused
        assert set(refused) == {402}
        shown = gateway.wait_until_nothing_held(team.name)
        assert balance_of(gateway, team.name) >= 0, shown
