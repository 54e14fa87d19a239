"""The requests Claude Code, Codex CLI, the Gemini CLI and the official SDKs (google-genai, openai,
anthropic) really sent (``tests/fixtures/agents``, saved by ``test_coding_agents.py``,
``test_gemini_cli.py`` and ``test_sdk_fixtures.py``), replayed through every upstream wire: passed
through to an upstream of their own protocol, translated for the others, each accepted by the
protocol-faithful fake upstream, answered in the agent's protocol, and charged what the answer
reported — without npm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.translate.gemini.names import camel_body
from tests.support import plain_http
from tests.support.agents import Exchange, check_charged_as_reported, streamed_text
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import AGENT_MODELS, Gateway
from tests.support.teams import Teams

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

FIXTURES = sorted((Path(__file__).resolve().parent.parent / "fixtures" / "agents").glob("*.json"))
UPSTREAM_PATHS = {
    "anthropic": "/v1/messages",
    "openai": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "gemini": "/v1beta/models/agent-gemini-upstream:streamGenerateContent",
}
#: The event after which the answer is complete, in each agent's protocol.
LAST_EVENT = {
    "/v1/chat/completions": "data: [DONE]",
    "/v1/messages": "event: message_stop",
    "/v1/responses": "event: response.completed",
    ":streamGenerateContent": '"finishReason"',
}


def _path(record: dict[str, Any], model: str) -> str:
    """The fixture's path for ``model``: the Gemini wire names the model in its path."""
    path: str = record["path"]
    if ":streamGenerateContent" in path:
        return f"/v1beta/models/{model}:streamGenerateContent?alt=sse"
    return path


def _last_event(path: str) -> str:
    return next(event for suffix, event in LAST_EVENT.items() if suffix in path)


def test_there_are_fixtures_of_every_agent_and_of_a_tool_round_trip():
    agents = {json.loads(f.read_text())["agent"] for f in FIXTURES}
    assert {"claude-code 2.1.330", "codex 0.169.0", "gemini-cli 0.61.0"} <= agents
    assert {agent.split()[0] for agent in agents} >= {"google-genai", "openai", "anthropic"}  # the SDKs' too
    bodies = [f.read_text() for f in FIXTURES]
    assert any('"tool_result"' in b for b in bodies)
    assert any('"function_call_output"' in b for b in bodies)
    assert any('"functionResponse"' in b for b in bodies)


@pytest.mark.parametrize("model", list(AGENT_MODELS))
@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_an_agent_s_request_on_every_upstream_wire(
    gateway: Gateway, teams: Teams, fake_upstream: FakeUpstream, fixture: Path, model: str
):
    record = json.loads(fixture.read_text())
    team = teams.open("100")
    headers = {**record["headers"], "authorization": f"Bearer {team.key}"}
    path = _path(record, model)
    body = record["body"] if path != record["path"] else {**record["body"], "model": model}
    answer = plain_http.post(gateway.root_url + path, json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    assert _last_event(path) in answer.text
    (sent,) = [r for r in fake_upstream.requests if r.path == UPSTREAM_PATHS[AGENT_MODELS[model]]]
    if record["path"] == UPSTREAM_PATHS[AGENT_MODELS[model]]:  # passed through: as the agent sent it
        assert sent.body == {**record["body"], "model": f"{model}-upstream"}
    if ":streamGenerateContent" in record["path"] and AGENT_MODELS[model] == "gemini":
        assert sent.body == camel_body(record["body"])  # passed through: as the client sent it, names in camelCase
    if any(f'"{kind}"' in fixture.read_text() for kind in ("tool_result", "function_call_output", "functionResponse")):
        assert "Echo: tool result:" in streamed_text(answer.content)
        assert "tollgate-marker-" in streamed_text(answer.content)
    exchange = Exchange(
        "POST",
        path,
        {},
        b"",
        answer.status_code,
        {k.lower(): v for k, v in answer.headers.items()},
        answer.content,
    )
    check_charged_as_reported(gateway, team, [exchange])
