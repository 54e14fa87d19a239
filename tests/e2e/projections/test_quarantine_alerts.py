"""Issue #27, finding 1, its last symptom: "alerts never reach the outbox". The outbox is filled by the
audit history projection, which an event it could not project once stopped for every team. Now that
event is set aside, and an alert crossed by a later event of another team still reaches the outbox and
a real webhook receiver, signed; so does one of the team whose event was set aside."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal

import openai
import pytest

from tests.e2e.projections.test_quarantine import _old_gateway_charges, _ready_checks
from tests.e2e.test_alerts import SECRET, Receiver, until
from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Teams

ASK = [{"role": "user", "content": "Say something short."}]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().start()
    yield r
    r.kill()


def _alerts_of(receiver: Receiver, team: str) -> list[dict[str, object]]:
    return [body for body in (json.loads(b) for _, b, _ in receiver.received) if body["team"] == team]


def test_alerts_after_an_event_set_aside_still_reach_the_webhook(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream, receiver: Receiver
):
    config = write_config(
        tmp_path_factory.mktemp("quarantine-alerts"),
        fake_upstream.base_url,
        settings=f'webhooks = [{{url = "{receiver.url}", secret_env = "ALERT_SECRET"}}]\nwebhook_retry_max_seconds = 2',
    )
    gateway = Gateway(config, env={"ALERT_SECRET": SECRET}).start()
    try:
        teams = Teams(gateway.config)
        old, other = teams.open("1"), teams.open("1")
        teams.close()
        _old_gateway_charges(gateway, old.name)  # its second charge no column can hold: set aside
        assert _ready_checks(gateway)["quarantined_events"].startswith("1 ")
        thresholds = {}
        for team in (other, old):  # a threshold just under the balance: the next request crosses it
            answer = plain_http.get(gateway.base_url + "/credits", headers={"Authorization": f"Bearer {team.key}"})
            thresholds[team.name] = Decimal(str(answer.json()["data"]["balance"])) - Decimal("0.001")
            gateway.cli("alert", "set", "--team", team.name, "--balance-below", str(thresholds[team.name]))
        for team in (other, old):
            with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
                client.chat.completions.create(model="fake-gpt", messages=ASK, max_tokens=20)
        for team in (other, old):
            delivered = until(lambda t=team.name: _alerts_of(receiver, t), f"{team.name}'s balance alert", within=30)
            micros = str(int(thresholds[team.name] * 10**6))  # the body gives amounts in micro-credits
            assert [(a["type"], a["threshold"]) for a in delivered] == [("alert.balance_below", micros)], delivered
        assert receiver.refused == []
        assert _ready_checks(gateway)["quarantined_events"].startswith("1 ")  # still set aside, and passed by
    finally:
        gateway.stop()
