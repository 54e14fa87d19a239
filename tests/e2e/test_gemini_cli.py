"""The Gemini CLI, unmodified, through Tollgate: it completes a task with a tool call against a Gemini
model (passed through) and models behind other providers' wires (translated), and the team is
charged exactly what the gateway reported.

The CLI runs as our users run it (``gemini -p``, the recipe in docs/clients.md, a temporary home),
through a recording proxy, against the session gateway and the fake upstream. Its first turn goes to
the Gemini wire (``streamGenerateContent?alt=sse``) and is passed through to the Gemini upstream or
translated for the model's; the
prompt asks the fake model to call the CLI's ``read_file`` tool on a file whose text only reading it
gives; the CLI reads it, sends it back as a ``functionResponse``, and the fake model's answer —
echoing it — must be what the CLI prints. Set ``TOLLGATE_SAVE_AGENT_FIXTURES=1`` to save the bodies it
sent as ``tests/fixtures/agents/gemini-cli-*.json`` (secrets removed).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agents import (
    RecordingProxy,
    check_charged_as_reported,
    run_gemini_cli,
    save_fixture,
    scrubbed,
)
from tests.support.gateway import Gateway
from tests.support.teams import Teams

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "agents"


@pytest.fixture(scope="module")
def proxy(gateway: Gateway) -> Iterator[RecordingProxy]:
    with RecordingProxy(gateway.root_url) as recording:
        yield recording


@pytest.mark.parametrize("model", ["agent-gemini", "agent-claude", "agent-gpt"])
def test_the_gemini_cli_reads_a_file_through_tollgate(
    gateway: Gateway, teams: Teams, proxy: RecordingProxy, tmp_path: Path, model: str
):
    team = teams.open("100")
    marker = f"tollgate-marker-{random.randint(1000, 9999)}"
    (tmp_path / "marker.txt").write_text(marker + "\n")
    call = json.dumps({"file_path": str(tmp_path / "marker.txt")})
    seen = len(proxy.exchanges)
    result = run_gemini_cli(
        proxy.url, team.key, model=model, prompt=f"Read the marker file. [[tool:read_file {call}]]", workdir=tmp_path
    )
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert "Echo: tool result:" in result.stdout, result.stdout
    assert marker in result.stdout, result.stdout

    exchanges = [e for e in proxy.exchanges[seen:] if ":streamGenerateContent" in e.path]
    assert len(exchanges) >= 2
    assert [e.status for e in exchanges] == [200] * len(exchanges)
    assert all(e.path == f"/v1beta/models/{model}:streamGenerateContent?alt=sse" for e in exchanges)
    assert all(e.request_headers.get("x-goog-api-key") == team.key for e in exchanges)
    first, last = exchanges[0].json(), exchanges[-1].json()
    declared = {f["name"] for tool in first["tools"] for f in tool.get("functionDeclarations", [])}
    assert {"read_file", "list_directory"} <= declared
    assert first["generationConfig"]["thinkingConfig"]["includeThoughts"] is True
    responses = [p["functionResponse"] for c in last["contents"] for p in c["parts"] if "functionResponse" in p]
    assert marker in json.dumps(responses)  # the file was read, and its text went back to the model
    check_charged_as_reported(gateway, team, exchanges)
    if model == "agent-claude" and os.environ.get("TOLLGATE_SAVE_AGENT_FIXTURES"):
        for turn, exchange in enumerate(exchanges):
            record = scrubbed(exchange, "gemini-cli 0.61.0", [team.key], {str(tmp_path): "/work/project"})
            save_fixture(FIXTURES / f"gemini-cli-{turn + 1}.json", record)
