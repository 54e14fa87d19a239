"""A team's balance as it was at any instant, through the admin API and the CLI: exactly what replaying
its events up to that instant gives, for a team served by the official SDK and topped up meanwhile."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import openai
import pytest

from app.store.event_store import LedgerStore, open_ledger_store
from domain.ledger import team_id
from domain.money import credits_from_micros, format_credits
from domain.settings import parse_settings
from tests.support import plain_http
from tests.support.gateway import ADMIN_KEY, Gateway
from tests.support.teams import Team


@pytest.fixture
def store(gateway: Gateway):
    settings = parse_settings(gateway.config.read_text(), str(gateway.config))
    opened = open_ledger_store(settings.database_url, gateway.config.parent, pool_size=2)
    yield opened
    opened.close()


def _replayed(store: LedgerStore, name: str, upto: int):
    team = None
    for event in store.events_after(team_id(name), 0, upto=upto):
        team = event.mutate(team)
    return team


def test_the_balance_at_every_event_is_the_replay_up_to_it(gateway: Gateway, team: Team, store: LedgerStore):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        for _ in range(3):
            client.chat.completions.create(model="fake-gpt", messages=[{"role": "user", "content": "hello"}])
        gateway.cli("credits", "add", "--team", team.name, "5")
        client.chat.completions.create(model="fake-gpt", messages=[{"role": "user", "content": "again"}], stream=False)
        gateway.wait_until_nothing_held(team.name)
        events = list(store.events_after(team_id(team.name), 0))
        assert len(events) >= 8
        admin = plain_http.Client(
            base_url=gateway.base_url.removesuffix("/v1") + "/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
        )
        with admin:
            for event in events:
                found = admin.get(f"/teams/{team.name}/balance", params={"at": event.timestamp.isoformat()})
                assert found.status_code == 200, found.text
                body = json.loads(found.content, parse_float=Decimal)
                version = max(e.originator_version for e in events if e.timestamp <= event.timestamp)
                replayed = _replayed(store, team.name, version)
                assert (body["balance_micros"], body["held_micros"], body["version"]) == (
                    replayed.balance,
                    replayed.held,
                    version,
                )
                assert body["balance"] == credits_from_micros(replayed.balance)
                assert body["available"] == credits_from_micros(replayed.balance - replayed.held)
                last = next(e for e in events if e.originator_version == version)
                assert body["last_event"]["type"] == type(last).__name__
                assert body["last_event"]["occurred_at"] == last.timestamp.isoformat()
            now = admin.get(f"/teams/{team.name}/balance").json()
            assert now["at"] is None
            assert now["version"] == events[-1].originator_version
            before = admin.get(
                f"/teams/{team.name}/balance", params={"at": (events[0].timestamp - timedelta(seconds=1)).isoformat()}
            )
            assert before.status_code == 404
            assert "was not opened yet" in before.json()["error"]["message"]
            assert admin.get("/teams/nobody/balance").status_code == 404
            bad = admin.get(f"/teams/{team.name}/balance", params={"at": "yesterday"})
            assert bad.status_code == 400
            assert bad.json()["error"]["param"] == "at"

        middle = events[len(events) // 2]
        printed = json.loads(
            gateway.cli(
                "ledger",
                "balance",
                "--team",
                team.name,
                "--at",
                middle.timestamp.isoformat().replace("+00:00", "Z"),
                "--json",
            ).stdout
        )
        replayed = _replayed(store, team.name, middle.originator_version)
        assert (printed["balance_micros"], printed["held_micros"]) == (replayed.balance, replayed.held)
        assert Decimal(printed["available"]) == credits_from_micros(replayed.balance - replayed.held)
        readable = gateway.cli("ledger", "balance", "--team", team.name).stdout
        final = _replayed(store, team.name, events[-1].originator_version)
        assert f"Team {team.name} at now: balance {format_credits(final.balance)} credits" in readable
        refused = gateway.cli("ledger", "balance", "--team", team.name, "--at", "soon", check=False)
        assert refused.returncode == 2
        assert "invalid --at 'soon'" in refused.stderr
        unknown = gateway.cli("ledger", "balance", "--team", "nobody", check=False)
        assert unknown.returncode == 1
        assert "does not exist" in unknown.stderr
