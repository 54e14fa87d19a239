"""The audit history and usage projections, as auditors and operators use them."""

from __future__ import annotations

import csv
import io
import json
import threading
from decimal import Decimal

import openai
import pytest

from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.store.event_store import open_ledger_store
from domain.ledger import team_id
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage
from projections.audit import verify_ledger
from projections.history import HistoryProjection
from tests.support.backend import RawDatabase, new_database_url
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Teams

PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))


@pytest.fixture(scope="module")
def traffic(tmp_path_factory, fake_upstream: FakeUpstream):
    """A gateway whose team made a few requests: the responses and the gateway."""
    config = write_config(tmp_path_factory.mktemp("history"), fake_upstream.base_url)
    gateway = Gateway(config).start()
    teams = Teams(config)
    team = teams.open("10")
    teams.close()
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:

        def ask(model: str, content: str):
            return client.chat.completions.create(model=model, messages=[{"role": "user", "content": content}])

        answers = [
            ask("fake-gpt", "one two"),
            ask("fake-claude", "three [[cached:2]]"),
            ask("fake-gpt", "four five six"),
        ]
        gateway.cli("credits", "add", "--team", team.name, "1", "--reference", "INV-7")
        gateway.wait_until_nothing_held(team.name)  # the state stays still while the tests compare it
        yield team, answers, gateway
        gateway.stop()


def micros(value) -> int:
    return int(Decimal(str(value)) * 1_000_000)


def exported(gateway: Gateway, team, *options: str) -> list[dict]:
    """The team's ledger entries, as ``tollgate ledger export --format jsonl`` prints them."""
    export = gateway.cli("ledger", "export", "--team", team.name, *options, "--format", "jsonl")
    return [json.loads(line) for line in export.stdout.splitlines()]


def test_the_history_has_every_entry_with_the_balances_clients_were_shown(traffic):
    team, answers, gateway = traffic
    rows = exported(gateway, team)
    assert [r["kind"] for r in rows] == ["team_opened", "top_up", "key_issued", "charge", "charge", "charge", "top_up"]
    assert rows[0]["amount"] == rows[2]["amount"] == 0  # an operator's actions that moved no money
    charges = rows[3:6]
    for row, answer in zip(charges, answers, strict=True):
        assert row["request_id"].startswith("req_")
        assert row["key_id"].startswith("key_")
        assert row["model"] == answer.model
        assert row["endpoint"] == "chat.completions"
        assert row["balance_after"] == micros(answer.usage.model_extra["remaining"]["credits"])
        assert -row["amount"] == micros(answer.usage.model_extra["cost"]["credits"])
        assert row["input_tokens"] + row["cache_write_tokens"] + row["cache_hit_tokens"] == answer.usage.prompt_tokens
        assert row["output_tokens"] == answer.usage.completion_tokens
        assert Decimal(row["cost_usd"]) == Decimal(str(answer.usage.model_extra["cost"]["usd"]))
    assert charges[1]["cache_hit_tokens"] == 2
    assert "cache_hit=0.3" in charges[1]["price"]
    assert rows[-1]["reference"] == "INV-7"
    assert sum(r["amount"] for r in rows) == rows[-1]["balance_after"]


def test_csv_and_jsonl_exports_carry_the_same_entries(traffic):
    team, _, gateway = traffic
    jsonl = exported(gateway, team)
    table = list(csv.DictReader(io.StringIO(gateway.cli("ledger", "export", "--team", team.name).stdout)))
    assert [{k: str(v) for k, v in row.items()} for row in jsonl] == table
    later = exported(gateway, team, "--since", jsonl[1]["occurred_at"])
    assert len(later) == len(jsonl) - 1


def test_history_is_readable_and_paginated(traffic):
    team, _, gateway = traffic
    page = gateway.cli("ledger", "history", "--team", team.name, "--per-page", "2", "--page", "2").stdout
    assert f"Team {team.name}: 7 ledger entries, page 2 of 4" in page
    assert len(page.strip().splitlines()) == 2 + 2


def test_rebuild_equals_the_live_projections_and_repairs_them(traffic):
    team, _, gateway = traffic
    raw = RawDatabase.of_config(gateway.config)
    tables = ("ledger_entries", "usage_daily", "team_balances", "api_keys")

    def snapshot():
        return {t: sorted(map(repr, raw.execute(f"SELECT * FROM {t}"))) for t in tables}

    gateway.cli("ledger", "export", "--team", team.name)  # caught up
    live = snapshot()
    assert gateway.cli("ledger", "rebuild").returncode == 0
    assert snapshot() == live

    raw.execute("UPDATE ledger_entries SET amount = amount - 1 WHERE kind = 'charge'")
    broken = gateway.cli("ledger", "verify", check=False)
    assert broken.returncode == 1
    assert "audit history row" in broken.stderr
    gateway.cli("ledger", "rebuild")
    assert snapshot() == live
    assert gateway.cli("ledger", "verify").returncode == 0


def test_usage_is_summed_by_team_key_model_and_day(traffic):
    team, answers, gateway = traffic
    raw = RawDatabase.of_config(gateway.config)
    rows = raw.execute(
        "SELECT model, requests, output_tokens, cost FROM usage_daily WHERE team_name = ? ORDER BY model", (team.name,)
    )
    by_model = {r[0]: r[1:] for r in rows}
    assert by_model["fake-gpt"][0] == 2
    assert by_model["fake-claude"][0] == 1
    assert by_model["fake-gpt"][1] == answers[0].usage.completion_tokens + answers[2].usage.completion_tokens
    assert sum(r[3] for r in rows) == sum(micros(a.usage.model_extra["cost"]["credits"]) for a in answers)


def test_racing_projectors_apply_every_event_exactly_once(tmp_path):
    url = new_database_url()
    store = open_ledger_store(url, tmp_path)
    with LedgerWriter(store) as writer:
        LedgerService(writer).create_team("busy", 10**12)
        tid = team_id("busy")
        for i in range(400):
            writer.on_team(tid, "busy", lambda t, i=i: t.place_hold(RequestOnLedger(f"r{i}", "k", "m", "chat"), 1000))
        futures = [
            writer.on_team(
                tid,
                "busy",
                lambda t, i=i: t.charge(
                    RequestOnLedger(f"r{i}", "k", "m", "chat"), TokenUsage(10, 10), PRICE, Decimal(100)
                ),
            )
            for i in range(400)
        ]
        for f in futures:
            f.result()

    def project():
        projection = HistoryProjection(store, store.database)
        projection.catch_up(batch=25)
        projection.close()

    threads = [threading.Thread(target=project) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    raw = RawDatabase(url, tmp_path)
    assert raw.execute("SELECT requests, input_tokens FROM usage_daily") == [(400, 4000)]
    assert raw.execute("SELECT COUNT(*) FROM ledger_entries") == [(402,)]  # the team opened, its top-up, the charges
    assert verify_ledger(store, store.database).ok
    store.close()
