"""Claude Code and Codex CLI, unmodified, through Tollgate: each completes a task with a tool call on
every upstream kind, and the team is charged exactly what the gateway reported.

The agents run as our users run them (``claude -p``, ``codex exec``; the README's recipes; a
temporary home), through a recording proxy, against the session gateway and the fake upstream. The
prompt asks the fake model for a shell command whose output only running it gives (``$((…))``); the
agent runs it, sends its output back, and the fake model's answer — echoing that output — must be
what the agent prints. Set ``TOLLGATE_SAVE_AGENT_FIXTURES=1`` to save the bodies the agents sent as
``tests/fixtures/agents/*.json`` (secrets removed), which ``test_agent_fixtures.py`` replays without npm.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agents import (
    Exchange,
    RecordingProxy,
    check_charged_as_reported,
    run_claude_code,
    run_codex,
    save_fixture,
    scrubbed,
)
from tests.support.gateway import Gateway
from tests.support.teams import Team, Teams

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "agents"
GENERATION = ("/v1/messages", "/v1/responses", "/v1/chat/completions")


@pytest.fixture(scope="module")
def proxy(gateway: Gateway) -> Iterator[RecordingProxy]:
    with RecordingProxy(gateway.root_url) as recording:
        yield recording


def task() -> tuple[str, str]:
    """A command whose output differs from its text, and the output."""
    number = random.randint(1000, 9999)
    return f"echo tollgate-marker-$(({number}+1))", f"tollgate-marker-{number + 1}"


def generations(exchanges: list[Exchange]) -> list[Exchange]:
    return [e for e in exchanges if e.path.split("?")[0] in GENERATION]


def save(agent: str, name: str, exchanges: list[Exchange], team: Team, places: dict[str, str]) -> None:
    if os.environ.get("TOLLGATE_SAVE_AGENT_FIXTURES"):
        for turn, exchange in enumerate(exchanges):
            save_fixture(FIXTURES / f"{name}-{turn + 1}.json", scrubbed(exchange, agent, [team.key], places))


@pytest.mark.parametrize(
    ("model", "auth"),
    [
        ("agent-claude", "token"),
        ("agent-claude", "api_key"),
        ("agent-gpt", "token"),
        ("agent-gpt", "api_key"),
        ("agent-codex", "token"),
    ],
)
def test_claude_code_runs_a_tool_through_tollgate(
    gateway: Gateway, teams: Teams, proxy: RecordingProxy, tmp_path: Path, model: str, auth: str
):
    team = teams.open("100")
    command, output = task()
    call = json.dumps({"command": command, "description": "print a marker"})
    prompt = f"Run the marker command. [[tool:Bash {call}]]"
    seen = len(proxy.exchanges)
    result = run_claude_code(
        proxy.url,
        team.key,
        model=model,
        prompt=prompt,
        auth=auth,  # type: ignore[arg-type]
        workdir=tmp_path,
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert result.stdout.strip().endswith(f"Echo: tool result: {output}"), result.stdout

    exchanges = generations(proxy.exchanges[seen:])
    assert [e.status for e in exchanges] == [200] * len(exchanges)
    assert len(exchanges) >= 2
    assert all(e.path.startswith("/v1/messages") for e in exchanges)
    key_header = "authorization" if auth == "token" else "x-api-key"
    assert all(team.key in e.request_headers.get(key_header, "") for e in exchanges)
    first, last = exchanges[0].json(), exchanges[-1].json()
    assert any(m["role"] == "system" for m in first["messages"])  # what used to be refused
    assert first["thinking"]["type"] == "adaptive"
    assert "context_management" in first
    results = [
        b
        for m in last["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert output in json.dumps(results)  # the command ran, and its output went back to the model
    check_charged_as_reported(gateway, team, exchanges)
    if auth == "token" and model == "agent-claude":
        save("claude-code 2.1.330", "claude-code", exchanges, team, {str(tmp_path): "/work/project"})


@pytest.mark.parametrize("model", ["agent-codex", "agent-gpt", "agent-claude"])
def test_codex_runs_a_tool_through_tollgate(
    gateway: Gateway, teams: Teams, proxy: RecordingProxy, tmp_path: Path, model: str
):
    team = teams.open("100")
    command, output = task()
    prompt = f"Run the marker command. [[tool:exec_command {json.dumps({'cmd': command})}]]"
    seen = len(proxy.exchanges)
    result = run_codex(proxy.url, team.key, model=model, prompt=prompt, workdir=tmp_path)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert result.stdout.strip().endswith(output), result.stdout
    assert "Echo: tool result:" in result.stdout

    exchanges = generations(proxy.exchanges[seen:])
    assert [e.status for e in exchanges] == [200] * len(exchanges)
    assert len(exchanges) >= 2
    assert all(e.path == "/v1/responses" for e in exchanges)
    first, last = exchanges[0].json(), exchanges[-1].json()
    assert {t["type"] for t in first["tools"]} >= {"function", "namespace", "web_search"}  # what used to be refused
    assert any(i.get("role") == "developer" for i in first["input"])
    outputs = [i for i in last["input"] if i.get("type") == "function_call_output"]
    assert output in json.dumps(outputs)  # the command ran, and its output went back to the model
    dropped = {e.response_headers.get("x-tollgate-dropped-tools") for e in exchanges}
    assert dropped == ({None} if model == "agent-codex" else {"web_search"})
    check_charged_as_reported(gateway, team, exchanges)
    if model == "agent-codex":
        save("codex 0.169.0", "codex", exchanges, team, {str(tmp_path): "/work/project"})
