"""Budgets, through real sockets and the official SDKs: a key (or a whole team) can never spend past
its budget, however many requests race for it; the refusal says which budget and when it resets;
the period resets at a UTC boundary crossed while the gateway runs (its ledger clock shifted to just
before midnight); and what is left is reported in ``usage``, ``GET /v1/key``, the CLI and the admin API.

fake-gpt costs 2.5 USD/M prompt tokens and 10 USD/M output tokens at 100 credits/USD: an output
token is 1,000 micro-credits.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tests.support import plain_http
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import ADMIN_KEY, Gateway, write_config
from tests.support.teams import Team, Teams

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

ASK = [{"role": "user", "content": "Say something short."}]


def key_id_of(gateway: Gateway, team: Team) -> str:
    return str(
        plain_http.get(f"{gateway.base_url}/key", headers={"Authorization": f"Bearer {team.key}"}).json()["data"][
            "key_id"
        ]
    )


def second_key(gateway: Gateway, team: Team) -> tuple[str, str]:
    """Another key of the team: its id and secret (the CLI prints the secret as its last line)."""
    secret = gateway.cli("key", "create", "--team", team.name).stdout.strip().splitlines()[-1]
    return key_id_of(gateway, Team(team.name, secret)), secret


def admin(gateway: Gateway) -> httpx.Client:
    return plain_http.Client(base_url=f"{gateway.root_url}/admin", headers={"Authorization": f"Bearer {ADMIN_KEY}"})


def spent_by_key(gateway: Gateway, team: str) -> Counter[str]:
    """What the ledger charged each key, in micro-credits (its export: charges are negative)."""
    spent: Counter[str] = Counter()
    for row in gateway.charges(team):
        spent[row["key_id"]] -= int(row["amount"])
    return spent


def until_budgeted(client: openai.OpenAI, within: float = 10.0) -> None:
    """Wait until the gateway holds the key's requests against its budget (its projector reads the
    budget within a poll interval): a request whose worst case is about a credit is then refused."""
    deadline = time.monotonic() + within
    while True:
        try:
            client.chat.completions.create(model="fake-gpt", messages=ASK, max_tokens=1000)
        except openai.APIStatusError as exc:
            if exc.status_code == 402 and "budget" in exc.message:
                return
        assert time.monotonic() < deadline, "the gateway never held the key against its budget"
        time.sleep(0.1)


def ask(client: openai.OpenAI, max_tokens: int) -> tuple[int, Decimal]:
    """One request: its status, and what its ``usage`` says it cost (0 if refused)."""
    try:
        answer = client.chat.completions.create(model="fake-gpt", messages=ASK, max_tokens=max_tokens)
    except openai.APIStatusError as exc:
        return exc.status_code, Decimal(0)
    return 200, Decimal(str(answer.usage.model_extra["cost"]["credits"]))  # type: ignore[union-attr]


def test_hundreds_of_concurrent_requests_never_spend_past_a_key_budget(gateway: Gateway, teams: Teams):
    team = teams.open("100")
    near_id, near_secret = key_id_of(gateway, team), team.key
    roomy_id, roomy_secret = second_key(gateway, team)
    free_id, free_secret = second_key(gateway, team)
    gateway.cli("key", "budget", "--team", team.name, near_id, "--credits", "0.08", "--period", "day")
    gateway.cli("key", "budget", "--team", team.name, roomy_id, "--credits", "0.6", "--period", "week")
    with ExitStack() as closing:
        clients = {
            k: closing.enter_context(openai.OpenAI(base_url=gateway.base_url, api_key=s, max_retries=0))
            for k, s in ((near_id, near_secret), (roomy_id, roomy_secret), (free_id, free_secret))
        }
        until_budgeted(clients[near_id])
        until_budgeted(clients[roomy_id])

        before = spent_by_key(gateway, team.name)  # what the probes above were charged
        jobs = [k for _ in range(100) for k in clients]  # 300 requests, the three keys interleaved
        with ThreadPoolExecutor(max_workers=32) as pool:
            results = list(pool.map(lambda k: (k, *ask(clients[k], 20)), jobs))

        statuses = Counter((k, status) for k, status, _ in results)
        assert statuses[(near_id, 402)] > 0, statuses
        assert statuses[(roomy_id, 402)] > 0, statuses
        assert statuses[(free_id, 200)] == 100, statuses  # no budget of its own: only the balance bounds it
        assert {status for _, status, _ in results} <= {200, 402}
        spent = spent_by_key(gateway, team.name)
        assert spent[near_id] <= 80_000, spent
        assert spent[roomy_id] <= 600_000, spent
        # What each key was told it cost is what the ledger charged it, to the micro-credit.
        for key in clients:
            told = sum((cost for k, _, cost in results if k == key), Decimal(0))
            assert told * 1_000_000 == spent[key] - before[key], (key, told, spent[key], before[key])


def test_the_refusal_names_the_budget_and_its_reset_in_each_endpoint_s_shape(gateway: Gateway, teams: Teams):
    team = teams.open("100")
    key_id = key_id_of(gateway, team)
    gateway.cli("key", "budget", "--team", team.name, key_id, "--credits", "0.05", "--period", "day")
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        until_budgeted(client)
        tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()

        with pytest.raises(openai.APIStatusError) as refused:
            client.chat.completions.create(model="fake-gpt", messages=ASK, max_tokens=100)
        assert refused.value.status_code == 402
        budget = refused.value.body["budget"]
        assert (budget["scope"], budget["key_id"], budget["period"]) == ("key", key_id, "day")
        assert Decimal(str(budget["limit"])) == Decimal("0.05")
        assert budget["resets_at"] == f"{tomorrow}T00:00:00+00:00"
        assert refused.value.response.headers["x-tollgate-budget-resets-at"] == budget["resets_at"]
        assert f"daily budget of 0.05 credits (it resets at {tomorrow}T00:00:00+00:00)" in refused.value.message
        # What the budget covers instead, as for the balance.
        affordable = refused.value.body["affordable_max_tokens"]
        assert 0 < affordable < 100

        with anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0) as claude:
            with pytest.raises(anthropic.APIStatusError) as messages_refused:
                claude.messages.create(model="fake-claude", max_tokens=4000, messages=ASK)
            assert messages_refused.value.status_code == 402
            body = messages_refused.value.body
            assert (body["type"], body["error"]["type"]) == ("error", "billing_error")
            assert body["error"]["budget"]["key_id"] == key_id

            # A request the budget covers is served, and its usage says what the budget has left.
            answer = client.chat.completions.create(model="fake-gpt", messages=ASK, max_tokens=affordable)
            usage = answer.usage.model_extra  # type: ignore[union-attr]
            left = Decimal(str(usage["remaining"]["key_budget_credits"]))
            assert left == Decimal("0.05") - Decimal(spent_by_key(gateway, team.name)[key_id]) / 1_000_000
            shown = plain_http.get(f"{gateway.base_url}/key", headers={"Authorization": f"Bearer {team.key}"}).json()[
                "data"
            ]
            assert (Decimal(str(shown["limit"])), Decimal(str(shown["limit_remaining"])), shown["limit_reset"]) == (
                Decimal("0.05"),
                left,
                "daily",
            )


def test_a_stream_reports_the_key_budget_left(gateway: Gateway, teams: Teams):
    team = teams.open("100")
    key_id = key_id_of(gateway, team)
    gateway.cli("key", "budget", "--team", team.name, key_id, "--credits", "0.5", "--period", "month")
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        until_budgeted(client)
        chunks = list(
            client.chat.completions.create(
                model="fake-gpt", messages=ASK, max_tokens=50, stream=True, stream_options={"include_usage": True}
            )
        )
        usage = chunks[-1].usage.model_extra  # type: ignore[union-attr]
        assert (
            Decimal(str(usage["remaining"]["key_budget_credits"]))
            == Decimal("0.5") - Decimal(spent_by_key(gateway, team.name)[key_id]) / 1_000_000
        )


def test_a_team_budget_bounds_every_key_even_those_held_against_leases(gateway: Gateway, teams: Teams):
    team = teams.open("100")
    _, other = second_key(gateway, team)
    with admin(gateway) as api:
        set_it = api.put(f"/teams/{team.name}/budget", json={"credits": "0.2", "period": "month", "reason": "pilot"})
        assert set_it.status_code == 200, set_it.text
        assert set_it.json()["budget"]["period"] == "month"
    with ExitStack() as closing:
        clients = [
            closing.enter_context(openai.OpenAI(base_url=gateway.base_url, api_key=k, max_retries=0))
            for k in (team.key, other)
        ]
        until_budgeted(clients[0])
        with ThreadPoolExecutor(max_workers=16) as pool:
            results = list(pool.map(lambda i: ask(clients[i % 2], 20), range(120)))
        assert {status for status, _ in results} == {200, 402}
        gateway.wait_until_nothing_held(team.name)
        assert sum(spent_by_key(gateway, team.name).values()) <= 200_000
        with admin(gateway) as api:
            shown = api.get(f"/teams/{team.name}/budget").json()["budget"]
            assert Decimal(str(shown["spent"])) * 1_000_000 == sum(spent_by_key(gateway, team.name).values())
            lifted = api.put(f"/teams/{team.name}/budget", json={"credits": None})
            assert lifted.json()["budget"] is None


def test_budgets_are_set_shown_and_lifted_by_the_cli_and_the_admin_api(gateway: Gateway, teams: Teams):
    team = teams.open("100")
    key_id = key_id_of(gateway, team)
    shown = gateway.cli("key", "budget", "--team", team.name, key_id, "--credits", "12.5", "--period", "weekly")
    assert "12.5 credits per week: 0 spent, 0 held, 12.5 left, resets" in shown.stdout
    assert "budget: 12.5 credits per week" in gateway.cli("key", "list", "--team", team.name).stdout
    with admin(gateway) as api:
        budget = api.get(f"/teams/{team.name}/keys/{key_id}/budget").json()["budget"]
        assert (Decimal(str(budget["limit"])), budget["period"]) == (Decimal("12.5"), "week")
        keys = api.get(f"/teams/{team.name}").json()["keys"]
        assert keys[0]["budget"]["period"] == "week"
        bad = api.put(f"/teams/{team.name}/keys/{key_id}/budget", json={"credits": "5", "period": "fortnight"})
        assert bad.status_code == 400
        assert "period" in bad.json()["error"]["message"]
        negative = api.put(f"/teams/{team.name}/keys/{key_id}/budget", json={"credits": "-5", "period": "day"})
        assert negative.status_code == 400
        unknown = api.put(f"/teams/{team.name}/keys/key_nope/budget", json={"credits": "5", "period": "day"})
        assert unknown.status_code == 404
        lifted = api.put(f"/teams/{team.name}/keys/{key_id}/budget", json={"credits": None, "reason": "done"})
        assert lifted.status_code == 200
        assert lifted.json()["budget"] is None
    assert "no budget" in gateway.cli("key", "budget", "--team", team.name, key_id).stdout
    refused = gateway.cli(
        "key", "budget", "--team", team.name, key_id, "--credits", "1", "--period", "year", check=False
    )
    assert refused.returncode == 2
    assert "day, week, month or none" in refused.stderr


def midnight_after(instant: datetime) -> datetime:
    return (instant + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)


def test_a_daily_budget_resets_exactly_when_the_day_changes(tmp_path: Path, fake_upstream: FakeUpstream):
    """The gateway's ledger clock starts 20 s before a UTC midnight: the key spends its day's budget
    and is refused, midnight passes while the gateway runs, and the new day's budget is whole again —
    with no job run and no event but the charges themselves."""
    real = datetime.now(UTC)
    midnight = midnight_after(real + timedelta(days=1))
    offset = (midnight - timedelta(seconds=20)) - real
    gateway = Gateway(
        write_config(tmp_path, fake_upstream.base_url),
        env={"TOLLGATE_CLOCK_OFFSET": str(offset.total_seconds()), "TOLLGATE_CLOCK_DRILL": "1"},
    ).start()
    try:
        gateway.cli("team", "create", "night-shift", "--credits", "100")
        secret = gateway.cli("key", "create", "--team", "night-shift").stdout.strip().splitlines()[-1]
        team = Team("night-shift", secret)
        key_id = key_id_of(gateway, team)
        with admin(gateway) as api:
            assert (
                api.put(
                    f"/teams/{team.name}/keys/{key_id}/budget", json={"credits": "0.05", "period": "day"}
                ).status_code
                == 200
            )
        with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
            until_budgeted(client)
            before: list[tuple[int, Decimal]] = []
            while not before or before[-1][0] == 200:
                before.append(ask(client, 20))
            assert before[-1][0] == 402
            with pytest.raises(openai.APIStatusError) as refused:
                client.chat.completions.create(model="fake-gpt", messages=ASK, max_tokens=20)
            assert refused.value.body["budget"]["resets_at"] == midnight.isoformat(), "midnight came too soon"

            while datetime.now(UTC) + offset < midnight + timedelta(seconds=0.2):
                time.sleep(0.1)
            after = [ask(client, 20) for _ in range(2)]
            assert [status for status, _ in after] == [200, 200]
            with admin(gateway) as api:
                budget = api.get(f"/teams/{team.name}/keys/{key_id}/budget").json()["budget"]
            # The new day's spend is exactly its two charges; the day before's is not carried over.
            assert Decimal(str(budget["spent"])) == sum((cost for _, cost in after), Decimal(0))
            assert budget["resets_at"] == (midnight + timedelta(days=1)).isoformat()
            charged_before = sum((cost for _, cost in before), Decimal(0))
            assert charged_before <= Decimal("0.05")
            assert gateway.cli("ledger", "verify").returncode == 0
    finally:
        gateway.stop()
