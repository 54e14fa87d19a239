"""No event stops the audit history projection (issue #27, finding 1): events already in a ledger —
written before client text was checked where it enters — may hold what a database cannot store.
Text is stored made storable, by one documented rule (NUL and lone surrogates become U+FFFD), the
same live, on rebuild and in verify; an event that still cannot be projected (here a charge of
10^20 tokens, which no 64-bit column holds) is set aside and reported by the health endpoint, the
metrics and ``ledger verify`` (which fails), while every event after it is projected and every team
reads on.

The events are written as a gateway before the fix wrote them: through the ledger's own writer,
beside a running gateway, on a ledger of their own."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

import openai
import pytest

from app.ledger.writer import LedgerWriter
from app.store.event_store import open_ledger_store
from domain.attribution import Attribution
from domain.ledger import team_id
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.settings import parse_settings
from domain.usage import TokenUsage
from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway, write_config
from tests.support.teams import Team, Teams

PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))
HI = [{"role": "user", "content": "hello after the poison"}]


@dataclass(frozen=True)
class Poisoned:
    gateway: Gateway
    old: Team  # the team whose events an older gateway wrote
    other: Team  # a team that only ever used the gateway
    huge_event: int  # the notification id of the charge no column can hold


def _old_gateway_charges(gateway: Gateway, team: str) -> int:
    """Charge ``team`` as a gateway before the fix would have: an end user and a tag holding NUL, then
    a charge of 10^20 input tokens, then an ordinary one. Returns the huge charge's notification id."""
    settings = parse_settings(gateway.config.read_text(), str(gateway.config))
    store = open_ledger_store(settings.database_url, gateway.config.parent)
    tid = team_id(team)
    charges = [
        ("old-1", TokenUsage(10, 5), {"project": "a\u0000b"}, "evil\u0000user"),
        ("old-2", TokenUsage(10**20, 5), {}, ""),
        ("old-3", TokenUsage(7, 3), {}, "after"),
    ]
    try:
        with LedgerWriter(store) as writer:
            for request_id, usage, tags, end_user in charges:
                writer.on_team(tid, team, lambda t: t.add_credits(10**6, "top-up")).result()  # the huge one takes it
                request = RequestOnLedger(
                    request_id, "key_old", "fake-gpt", "chat.completions", Attribution(tags or {}, end_user)
                )
                writer.on_team(tid, team, lambda t, r=request: t.place_hold(r, 10_000)).result()
                writer.on_team(
                    tid, team, lambda t, r=request, u=usage: t.charge_priced(r, u, PRICE, Decimal(100))
                ).result()
        huge = [n.id for n in store.notifications() if b"old-2" in n.state and n.topic.endswith("Charged")]
    finally:
        store.close()
    assert len(huge) == 1
    return huge[0]


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Poisoned]:
    gateway = Gateway(write_config(tmp_path_factory.mktemp("quarantine"), fake_upstream.base_url)).start()
    try:
        teams = Teams(gateway.config)
        old, other = teams.open("10"), teams.open("10")
        teams.close()
        huge = _old_gateway_charges(gateway, old.name)
        with openai.OpenAI(base_url=gateway.base_url, api_key=other.key, max_retries=0) as sdk:
            sdk.chat.completions.create(model="fake-gpt", messages=HI, user="alice")
            yield Poisoned(gateway, old, other, huge)
    finally:
        gateway.stop()


def _exported(gateway: Gateway, team: str) -> list[dict]:
    return [
        json.loads(line)
        for line in gateway.cli("ledger", "export", "--team", team, "--format", "jsonl").stdout.splitlines()
    ]


def _ready_checks(gateway: Gateway, within: float = 10.0) -> dict[str, str]:
    """``/health/ready``'s checks, once the projector has looked at the projection since the poison."""
    deadline = time.monotonic() + within
    while True:
        checks = plain_http.get(gateway.root_url + "/health/ready").json()["checks"]
        if checks["quarantined_events"] != "0" or time.monotonic() > deadline:
            return checks
        time.sleep(0.2)


def test_other_teams_read_on_past_events_no_database_can_store(poisoned: Poisoned):
    gateway, other = poisoned.gateway, poisoned.other
    key = plain_http.get(gateway.base_url + "/key", headers={"Authorization": f"Bearer {other.key}"})
    assert key.status_code == 200, key.text
    assert key.json()["data"]["usage"] > 0
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    for path in (
        f"/admin/teams/{other.name}/history",
        f"/admin/teams/{other.name}/usage",
        f"/admin/teams/{other.name}/usage?by=user",
    ):
        assert plain_http.get(gateway.root_url + path, headers=admin).status_code == 200, path
    team = {"Authorization": f"Bearer {other.key}"}
    for view in ("history", "usage", "attribution", "requests", "alerts", "export"):
        answer = plain_http.get(gateway.root_url + f"/dashboard/api/teams/{other.name}/{view}", headers=team)
        assert answer.status_code == 200, (view, answer.text)
    assert [r["end_user"] for r in _exported(gateway, other.name) if r["kind"] == "charge"] == ["alice"]
    history = gateway.cli("ledger", "history", "--team", other.name)
    assert history.returncode == 0
    usage = gateway.cli("usage", "--team", other.name, "--by", "user")
    assert "alice" in usage.stdout
    month = time.strftime("%Y-%m", time.gmtime())
    statement = plain_http.get(gateway.root_url + f"/admin/teams/{other.name}/statements/{month}", headers=admin)
    assert statement.status_code == 200
    assert statement.content  # once, an empty 200: the statement read a projection that had stopped
    assert gateway.cli("ledger", "statement", "--team", other.name, "--month", month).returncode == 0


def test_text_no_database_can_store_is_stored_as_the_replacement_character(poisoned: Poisoned):
    gateway, old = poisoned.gateway, poisoned.old
    charges = [r for r in _exported(gateway, old.name) if r["kind"] == "charge"]
    assert [(c["request_id"], c["end_user"], c["tags"]) for c in charges] == [
        ("old-1", "evil\ufffduser", "project=a\ufffdb"),
        ("old-3", "after", ""),
    ]  # old-2 is set aside
    by_user = plain_http.get(
        gateway.root_url + f"/admin/teams/{old.name}/usage",
        params={"by": "user"},
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
    ).json()
    assert {r["value"] for r in by_user["data"]} == {"evil\ufffduser", "after"}


def test_an_event_that_cannot_be_projected_is_set_aside_and_reported_everywhere(poisoned: Poisoned):
    gateway = poisoned.gateway
    checks = _ready_checks(gateway)
    assert checks["quarantined_events"].startswith("1 ")
    assert checks["history_projection"] == "current" or checks["history_projection"].endswith("events behind")
    assert plain_http.get(gateway.root_url + "/health/ready").status_code == 200  # serving is not at stake
    scrape = plain_http.get(gateway.root_url + "/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"}).text
    assert "tollgate_projection_quarantined_events 1.0" in scrape
    assert "tollgate_projection_lag_events " in scrape

    lines = [line["message"] for line in gateway.log_lines() if line.get("level") == "error"]
    assert not [m for m in lines if "could not catch up" in m]  # once a traceback three times a second
    assert len([m for m in lines if "cannot be projected" in m]) <= 1  # said once, by whoever set it aside

    verify = gateway.cli("ledger", "verify", check=False)
    assert verify.returncode == 1
    assert "set aside 1 event(s)" in verify.stderr
    assert f"#{poisoned.huge_event} (TeamLedger.Charged)" in verify.stderr
    assert "64-bit" in verify.stderr
    over_api = plain_http.get(
        gateway.root_url + "/admin/ledger/verify", headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=60
    ).json()
    assert over_api["ok"] is False
    assert over_api["quarantined"] == 1


def test_a_rebuild_makes_the_same_rows_and_sets_the_same_event_aside(poisoned: Poisoned):
    gateway, old = poisoned.gateway, poisoned.old
    before = _exported(gateway, old.name)
    rebuilt = gateway.cli("ledger", "rebuild", check=False)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert _exported(gateway, old.name) == before
    verify = gateway.cli("ledger", "verify", check=False)
    assert verify.returncode == 1
    assert "set aside 1 event(s)" in verify.stderr  # still unprojectable: still set aside, once
    assert "differs" not in verify.stderr
