"""What the official SDKs send, kept as replay fixtures as the coding agents' requests are.

Each SDK (google-genai on Gemini's wire, openai on Chat Completions and on Responses, anthropic on
Messages) runs a streamed tool round trip through a recording proxy in front of the gateway: the
model calls a tool, the SDK sends its result back with a marker, and the answer echoes it. The
requests it sent are compared with the saved fixtures (``tests/fixtures/agents/sdk-*.json``) in what
the replay relies on, and ``test_agent_fixtures.py`` replays the fixtures on every upstream wire
without the SDKs. Set ``TOLLGATE_SAVE_AGENT_FIXTURES=1`` to save them again (after an SDK upgrade).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from tests.support.agents import Exchange, RecordingProxy, check_charged_as_reported, save_fixture, scrubbed
from tests.support.gateway import Gateway
from tests.support.teams import Team, Teams

pytestmark = pytest.mark.usefixtures("ledger_verified_after")

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "agents"
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
ASK = 'Read the marker file. [[tool:read_file {"path": "marker.txt"}]]'


@pytest.fixture(scope="module")
def proxy(gateway: Gateway) -> Iterator[RecordingProxy]:
    with RecordingProxy(gateway.root_url) as recording:
        yield recording


def recorded(proxy: RecordingProxy, run: Callable[[], str], marker: str, path_part: str) -> list[Exchange]:
    """The exchanges ``run`` made (its answer must echo ``marker``, the tool's result)."""
    seen = len(proxy.exchanges)
    text = run()
    assert "Echo: tool result:" in text
    assert marker in text
    exchanges = [e for e in proxy.exchanges[seen:] if path_part in e.path]
    assert all(e.finished.wait(10) for e in exchanges), "the proxy did not finish recording an answer"
    assert [e.status for e in exchanges] == [200, 200]
    return exchanges


def kept(exchanges: list[Exchange], sdk: str, team: Team, marker: str) -> None:
    """Compare the requests with the saved fixtures (or save them): the same path, the same members
    in each body, the tool's result sent back."""
    agent = f"{sdk} {version(sdk)}"
    for turn, exchange in enumerate(exchanges, start=1):
        record = scrubbed(exchange, agent, [team.key], {marker: "tollgate-marker-0000"})
        path = FIXTURES / f"sdk-{sdk}-{turn}.json"
        if os.environ.get("TOLLGATE_SAVE_AGENT_FIXTURES"):
            save_fixture(path, record)
            continue
        saved = json.loads(path.read_text())
        assert (saved["path"], sorted(saved["body"])) == (record["path"], sorted(record["body"])), path.name
        if saved["agent"] == agent:  # the same SDK sends a request of the same shape (its ids vary)
            assert shape(saved) == shape(record), path.name
    assert "tollgate-marker-0000" in json.dumps(json.loads((FIXTURES / f"sdk-{sdk}-2.json").read_text()))


def shape(value: object) -> object:
    """A request's structure: every member and list, with each value's type in place of the value."""
    if isinstance(value, dict):
        return {name: shape(member) for name, member in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return type(value).__name__


def marker() -> str:
    return f"tollgate-marker-{random.randint(1000, 9999)}"


def test_the_google_genai_sdk_s_streamed_function_round_trip(gateway: Gateway, teams: Teams, proxy: RecordingProxy):
    team, mark = teams.open("100"), marker()
    client = genai.Client(api_key=team.key, http_options=types.HttpOptions(base_url=proxy.url))
    config = types.GenerateContentConfig(
        system_instruction="You read files.",
        tools=[
            types.Tool(
                function_declarations=[types.FunctionDeclaration(name="read_file", parameters_json_schema=SCHEMA)]
            )
        ],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        max_output_tokens=200,
        temperature=0.2,
        thinking_config=types.ThinkingConfig(include_thoughts=True),
    )
    ask = types.Content(role="user", parts=[types.Part(text=ASK)])

    def run() -> str:
        chunks = list(client.models.generate_content_stream(model="agent-claude", contents=[ask], config=config))
        call = next(c for chunk in chunks for c in chunk.function_calls or [])
        said = types.Content(role="model", parts=[types.Part(function_call=call)])
        answered = types.Part.from_function_response(name="read_file", response={"output": mark})
        again = [ask, said, types.Content(role="user", parts=[answered])]
        return "".join(
            c.text or ""
            for c in client.models.generate_content_stream(model="agent-claude", contents=again, config=config)
        )

    exchanges = recorded(proxy, run, mark, ":streamGenerateContent")
    check_charged_as_reported(gateway, team, exchanges)
    kept(exchanges, "google-genai", team, mark)


def test_the_openai_sdk_s_streamed_chat_tool_round_trip(gateway: Gateway, teams: Teams, proxy: RecordingProxy):
    team, mark = teams.open("100"), marker()
    tool = {"type": "function", "function": {"name": "read_file", "parameters": SCHEMA}}

    def run() -> str:
        with openai.OpenAI(base_url=proxy.url + "/v1", api_key=team.key, max_retries=0) as client:
            ask = [{"role": "system", "content": "You read files."}, {"role": "user", "content": ASK}]
            first = client.chat.completions.create(
                model="agent-gpt",
                messages=ask,
                tools=[tool],
                stream=True,
                stream_options={"include_usage": True},  # type: ignore[arg-type,list-item]
            )
            deltas = [d for c in first if c.choices for d in c.choices[0].delta.tool_calls or []]
            arguments = "".join(d.function.arguments or "" for d in deltas if d.function is not None)
            call = {"id": deltas[0].id, "type": "function", "function": {"name": "read_file", "arguments": arguments}}
            again = [
                *ask,
                {"role": "assistant", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": mark},
            ]
            second = client.chat.completions.create(
                model="agent-gpt",
                messages=again,
                tools=[tool],
                stream=True,
                stream_options={"include_usage": True},  # type: ignore[arg-type,list-item]
            )
            return "".join(c.choices[0].delta.content or "" for c in second if c.choices)

    exchanges = recorded(proxy, run, mark, "/v1/chat/completions")
    check_charged_as_reported(gateway, team, exchanges)
    kept(exchanges, "openai", team, mark)


def test_the_anthropic_sdk_s_streamed_tool_round_trip(gateway: Gateway, teams: Teams, proxy: RecordingProxy):
    team, mark = teams.open("100"), marker()
    tool = {"name": "read_file", "input_schema": SCHEMA}

    def run() -> str:
        with anthropic.Anthropic(base_url=proxy.url, api_key=team.key, max_retries=0) as client:
            ask = [{"role": "user", "content": ASK}]
            with client.messages.stream(
                model="agent-claude", max_tokens=200, system="You read files.", messages=ask, tools=[tool]
            ) as stream:  # type: ignore[arg-type,list-item]
                first = stream.get_final_message()
            (call,) = [b for b in first.content if b.type == "tool_use"]
            result = {"type": "tool_result", "tool_use_id": call.id, "content": mark}
            again = [*ask, {"role": "assistant", "content": first.content}, {"role": "user", "content": [result]}]
            with client.messages.stream(
                model="agent-claude", max_tokens=200, system="You read files.", messages=again, tools=[tool]
            ) as stream:  # type: ignore[arg-type,list-item]
                return stream.get_final_text()

    exchanges = recorded(proxy, run, mark, "/v1/messages")
    check_charged_as_reported(gateway, team, exchanges)
    kept(exchanges, "anthropic", team, mark)
