"""What a balance can afford: every refusal for credits says the largest output limit the available
balance covers (in the endpoint's own error shape and ``x-tollgate-affordable-max-tokens``), and a
key or team that opted in (``clamp_output_to_balance``) is served with its output limit lowered to
that instead — with Claude Code's own default ``max_tokens`` (32,000) on a balance of one credit.
And what a team key can read of its money (``GET /v1/credits``) and of itself (``GET /v1/key``),
in OpenRouter's shapes.
"""

from __future__ import annotations

import json
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tests.support import plain_http
from tests.support.agents import RecordingProxy, run_claude_code
from tests.support.gateway import Gateway
from tests.support.teams import Teams

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

ASK = [{"role": "user", "content": "Say something short."}]


def when_seen(client: openai.OpenAI, clamped: bool, within: float = 10.0) -> Any:
    """Ask for more than the balance covers until the gateway answers as the team's clamp setting
    says (its projector reads policy changes four times a second): the raw answer once served with
    the setting on, None once refused with it off."""
    deadline = time.monotonic() + within
    while True:
        try:
            answer = client.chat.completions.with_raw_response.create(model="fake-gpt", messages=ASK, max_tokens=1000)
        except openai.APIStatusError as exc:
            status, answer = exc.status_code, None
            assert status == 402
        if (answer is not None) == clamped:
            return answer
        assert time.monotonic() < deadline, f"the gateway did not see clamp {'on' if clamped else 'off'}"
        time.sleep(0.1)


def test_a_refusal_says_the_largest_output_limit_the_balance_covers(gateway: Gateway, teams: Teams):
    """fake-gpt: 2.5 USD/M in (3.125 for cache writes, the dearest), 10 USD/M out, 100 credits/USD."""
    team = teams.open("0.05")  # 50,000 micro-credits
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        with pytest.raises(openai.APIStatusError) as refused:
            client.chat.completions.create(model="fake-gpt", messages=ASK, max_tokens=1000)
        assert refused.value.status_code == 402
        affordable = refused.value.body["affordable_max_tokens"]
        assert refused.value.response.headers["x-tollgate-affordable-max-tokens"] == str(affordable)
        assert f"covers max_tokens up to {affordable}" in refused.value.message
        assert 0 < affordable < 1000
        # Exactly the largest: one more token is refused, that many is served.
        with pytest.raises(openai.APIStatusError) as again:
            client.chat.completions.create(model="fake-gpt", messages=ASK, max_tokens=affordable + 1)
        assert again.value.status_code == 402
        served = client.chat.completions.create(model="fake-gpt", messages=ASK, max_tokens=affordable)
        assert served.choices[0].message.content


def test_the_refusal_comes_in_each_endpoint_s_own_shape(gateway: Gateway, teams: Teams):
    team = teams.open("0.01")
    with anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0) as claude:
        with pytest.raises(anthropic.APIStatusError) as refused:
            claude.messages.create(model="fake-claude", max_tokens=4000, messages=ASK)
        assert refused.value.status_code == 402
        body = refused.value.body
        assert body["type"] == "error"
        assert body["error"]["type"] == "billing_error"
        assert body["error"]["affordable_max_tokens"] == int(
            refused.value.response.headers["x-tollgate-affordable-max-tokens"]
        )
        with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
            with pytest.raises(openai.APIStatusError) as responses_refused:
                client.responses.create(model="fake-codex", input="Hi", max_output_tokens=4000)
            assert responses_refused.value.status_code == 402
            assert "covers max_output_tokens up to" in responses_refused.value.message


def test_a_team_that_opted_in_is_served_with_the_output_limit_its_balance_covers(
    gateway: Gateway, teams: Teams, fake_upstream
):
    team = teams.open("0.05")
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        with pytest.raises(openai.APIStatusError) as refused:
            client.chat.completions.create(model="fake-gpt", messages=ASK, max_tokens=1000)
        affordable = refused.value.body["affordable_max_tokens"]
        gateway.cli("team", "clamp", team.name, "on")
        answer = when_seen(client, clamped=True)
        assert answer.headers["x-tollgate-output-clamped"] == str(affordable)
        assert fake_upstream.requests[-1].body["max_tokens"] == affordable  # what went upstream
        remaining = Decimal(str(answer.parse().usage.model_extra["remaining"]["credits"]))
        assert 0 <= remaining < Decimal("0.05")
        gateway.cli("team", "clamp", team.name, "off")
        assert when_seen(client, clamped=False) is None


def test_claude_code_s_default_max_tokens_on_a_small_balance(gateway: Gateway, teams: Teams, tmp_path: Path):
    """Claude Code asks for 32,000 output tokens on every turn: on three credits (agent-claude: 1 USD/M
    out, so 3.2 credits to hold for that, beside its long prompt) it is refused, told what the balance
    affords; with the team opted in, it does its task, each turn's output limit lowered to what is left."""
    team = teams.open("3")
    command = "echo tollgate-afford-$((41+1))"
    prompt = f"Run the marker command. [[tool:Bash {json.dumps({'command': command, 'description': 'marker'})}]]"
    with RecordingProxy(gateway.root_url) as proxy:
        refused = run_claude_code(
            proxy.url, team.key, model="agent-claude", prompt=prompt, auth="token", workdir=tmp_path
        )
        turns = [e for e in proxy.exchanges if e.path.startswith("/v1/messages")]
        assert turns
        assert all(e.status == 402 for e in turns), [e.status for e in turns]
        assert turns[0].json()["max_tokens"] == 32000  # Claude Code's own default
        affordable = int(turns[0].response_headers["x-tollgate-affordable-max-tokens"])
        assert 0 < affordable < 32000
        assert refused.returncode != 0 or "Echo" not in refused.stdout

        gateway.cli("team", "clamp", team.name, "on")
        with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
            when_seen(client, clamped=True)
        seen = len(proxy.exchanges)
        done = run_claude_code(proxy.url, team.key, model="agent-claude", prompt=prompt, auth="token", workdir=tmp_path)
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        assert done.stdout.strip().endswith("Echo: tool result: tollgate-afford-42"), done.stdout
        served = [e for e in proxy.exchanges[seen:] if e.path.startswith("/v1/messages") and e.status == 200]
        assert len(served) >= 2
        clamped = [int(e.response_headers["x-tollgate-output-clamped"]) for e in served]
        assert all(0 < c < 32000 for c in clamped)
        assert clamped[0] >= clamped[-1]  # each turn gets what is left


def test_a_team_key_reads_its_credits_and_its_holds(gateway: Gateway, teams: Teams):
    team = teams.open("12.5")
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        cost = Decimal(
            str(client.chat.completions.create(model="fake-gpt", messages=ASK).usage.model_extra["cost"]["credits"])
        )
        for header in ({"Authorization": f"Bearer {team.key}"}, {"x-api-key": team.key}):
            data = plain_http.get(gateway.base_url + "/credits", headers=header).json()["data"]
            assert Decimal(str(data["total_credits"])) == Decimal("12.5")
            assert Decimal(str(data["total_usage"])) == cost
            assert Decimal(str(data["balance"])) == Decimal("12.5") - cost
            assert Decimal(str(data["available"])) == Decimal(str(data["balance"])) - Decimal(str(data["held"]))
            held = sum(Decimal(str(h["credits"])) for h in data["holds"])
            assert held == Decimal(str(data["held"]))
            assert all(h["age_seconds"] >= 0 and h["kind"] in ("hold", "lease") for h in data["holds"])
        refused = plain_http.get(gateway.base_url + "/credits", headers={"Authorization": "Bearer tg-nope"})
        assert refused.status_code == 401
        assert refused.json()["error"]["type"] == "authentication_error"


def test_a_team_key_reads_its_own_usage_in_openrouter_s_shape(gateway: Gateway, teams: Teams):
    team = teams.open("10")
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        costs = [
            Decimal(
                str(client.chat.completions.create(model="fake-gpt", messages=ASK).usage.model_extra["cost"]["credits"])
            )
            for _ in range(3)
        ]
        data = plain_http.get(gateway.base_url + "/key", headers={"Authorization": f"Bearer {team.key}"}).json()["data"]
        for field in ("usage", "usage_daily", "usage_weekly", "usage_monthly"):
            assert Decimal(str(data[field])) == sum(costs), field
        assert data["limit"] is None
        assert data["limit_remaining"] is None
        assert data["is_free_tier"] is False
        assert data["team"] == team.name
