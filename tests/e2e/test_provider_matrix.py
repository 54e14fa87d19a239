"""Every client wire against every cloud provider's kind, through one gateway and real sockets: the
Chat Completions, Responses, Messages and Gemini clients (the openai, anthropic and google-genai SDKs;
raw HTTP where an SDK hides Tollgate's fields) against `gemini`, `vertex` (Claude and Gemini),
`bedrock` (InvokeModel and Converse), `azure-openai` (chat and Responses) deployments on the fakes,
each plain, streamed and with a tool round trip, each answer's reported cost equal to its ledger
charge, and the ledger verifying after.
The provider-specific behaviour (URLs, signatures, tokens, refusals) is in each kind's own suite."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tests.e2e.test_bedrock_upstream import AWS_ENV
from tests.support import plain_http
from tests.support.agents import docs_block
from tests.support.charges import charged
from tests.support.fake_bedrock import REGION
from tests.support.fake_upstream import FakeUpstream
from tests.support.fake_vertex import PROJECT, service_account_file
from tests.support.gateway import Gateway, verified_gateway, write_config
from tests.support.teams import Team, Teams, teams_of

KINDS = [
    "gemini-pro",
    "claude-sonnet-vertex",
    "gemini-pro-vertex",
    "matrix-bedrock-claude",
    "matrix-bedrock-llama",
    "matrix-azure-chat",
    "matrix-azure-responses",
]
WIRES = ["chat", "responses", "messages", "gemini"]
HELLO = "hello there gateway"
ASK = 'find it [[tool:lookup {"word": "toll"}]]'
SCHEMA = {"type": "object", "properties": {"word": {"type": "string"}}}
ANSWER = "a fee for passing"


def _bedrock(model_id: str, api: str, model: str, root: str) -> str:
    return f"""
[[models]]
id = "{model_id}"
display_name = "{model_id}"
owned_by = "aws"
context_window = 128000
max_output_tokens = 4096
pricing = {{input = 3.3, output = 16.5, cache_create = 4.125, cache_hit = 0.33}}
upstream = {{kind = "bedrock", api = "{api}", region = "{REGION}", base_url = "{root}", model = "{model}"}}
"""


def _azure(model_id: str, api: str, deployment: str, root: str) -> str:
    return f"""
[[models]]
id = "{model_id}"
display_name = "{model_id}"
owned_by = "openai"
context_window = 128000
max_output_tokens = 4096
pricing = {{input = 2.5, output = 10, cache_create = 2.5, cache_hit = 1.25}}
upstream = {{kind = "azure-openai", api = "{api}", base_url = "{root}", api_version = "2024-10-21", \
api_key_env = "UPSTREAM_KEY", model = "{deployment}"}}
"""


def config_with_every_provider(directory: Path, fake: FakeUpstream) -> Path:
    """The base configuration, the Gemini and Vertex recipes as docs/ gives them (pointed at the
    fake), Claude and Llama on Bedrock, and GPT on Azure OpenAI (a chat and a Responses deployment)."""
    config = write_config(directory, fake.base_url)
    root = fake.anthropic_base_url
    gemini = docs_block("gemini.md", "gemini-config").replace(
        'kind = "gemini",', f'kind = "gemini", base_url = "{root}",'
    )
    key = service_account_file(directory / "vertex-sa.json", root + "/token")
    vertex = docs_block("vertex.md", "vertex-config").replace("/etc/tollgate/vertex-sa.json", str(key))
    vertex = vertex.replace('project = "my-project"', f'project = "{PROJECT}", base_url = "{root}"')
    bedrock = _bedrock("matrix-bedrock-claude", "messages", "us.anthropic.claude-sonnet-4-20250514-v1:0", root)
    converse = _bedrock("matrix-bedrock-llama", "converse", "us.meta.llama3-3-70b-instruct-v1:0", root)
    azure = _azure("matrix-azure-chat", "chat", "gpt-4o-prod", root)
    azure += _azure("matrix-azure-responses", "responses", "codex-prod", root)
    config.write_text(config.read_text() + "\n" + gemini + "\n" + vertex + bedrock + converse + azure)
    return config


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    config = config_with_every_provider(tmp_path_factory.mktemp("matrix"), fake_upstream)
    yield from verified_gateway(config, {**AWS_ENV, "GEMINI_API_KEY": "upstream-secret"})


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def _micros(amount: Any) -> int:
    return int(Decimal(str(amount)) * 1_000_000)


def _sse(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and "[DONE]" not in line]


# -- one request on each wire: (the text answered, the cost reported, in micro-credits) ------------


def chat(gw: Gateway, team: Team, model: str, stream: bool) -> tuple[str, int]:
    with openai.OpenAI(base_url=gw.base_url, api_key=team.key, max_retries=0) as client:
        if not stream:
            answer = client.chat.completions.create(model=model, messages=[{"role": "user", "content": HELLO}])
            assert answer.usage is not None
            return answer.choices[0].message.content or "", _micros(answer.usage.model_extra["cost"]["credits"])  # type: ignore[index]
        chunks = list(
            client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": HELLO}],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    usage = chunks[-1].usage
    assert usage is not None
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, _micros(usage.model_extra["cost"]["credits"])  # type: ignore[index]


def responses(gw: Gateway, team: Team, model: str, stream: bool) -> tuple[str, int]:
    with openai.OpenAI(base_url=gw.base_url, api_key=team.key, max_retries=0) as client:
        if not stream:
            answer = client.responses.create(model=model, input=HELLO)
        else:
            events = list(client.responses.create(model=model, input=HELLO, stream=True))
            (done,) = [e for e in events if e.type == "response.completed"]
            answer = done.response  # type: ignore[union-attr]
    assert answer.usage is not None
    return answer.output_text, _micros(answer.usage.model_extra["cost"]["credits"])  # type: ignore[index]


def messages(gw: Gateway, team: Team, model: str, stream: bool) -> tuple[str, int]:
    with anthropic.Anthropic(base_url=gw.root_url, api_key=team.key, max_retries=0) as claude:
        ask: Any = [{"role": "user", "content": HELLO}]
        if not stream:
            message = claude.messages.create(model=model, max_tokens=200, messages=ask)
            return message.content[0].text, _micros(message.usage.model_extra["cost"]["credits"])  # type: ignore[union-attr,index]
        with claude.messages.stream(model=model, max_tokens=200, messages=ask) as events:
            seen = list(events)
            text = events.get_final_message().content[0].text  # type: ignore[union-attr]
    (delta,) = [e for e in seen if e.type == "message_delta"]
    return text, _micros(delta.usage.model_extra["cost"]["credits"])  # type: ignore[index]


def gemini(gw: Gateway, team: Team, model: str, stream: bool) -> tuple[str, int]:
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    answer = plain_http.post(
        f"{gw.root_url}/v1beta/models/{model}:{method}",
        json={"contents": [{"role": "user", "parts": [{"text": HELLO}]}]},
        headers={"x-goog-api-key": team.key},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    chunks = _sse(answer.text) if stream else [answer.json()]
    text = "".join(p.get("text", "") for c in chunks for p in c["candidates"][0].get("content", {}).get("parts", []))
    return text, _micros(chunks[-1]["usageMetadata"]["cost"]["credits"])


ONE_REQUEST: dict[str, Callable[[Gateway, Team, str, bool], tuple[str, int]]] = {
    "chat": chat,
    "responses": responses,
    "messages": messages,
    "gemini": gemini,
}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("model", KINDS)
def test_each_wire_is_answered_by_each_provider_and_charged_what_it_reports(
    gateway: Gateway, teams: Teams, model: str, wire: str, stream: bool
):
    team = teams.open("100")
    text, cost = ONE_REQUEST[wire](gateway, team, model, stream)
    assert text == f"Echo: {HELLO}"
    assert [cost] == charged(gateway, team)
    assert cost > 0


# -- a tool round trip on each wire: (the final text, the costs reported) -------------------------


def chat_tools(gw: Gateway, team: Team, model: str) -> tuple[str, list[int]]:
    tools: Any = [{"type": "function", "function": {"name": "lookup", "parameters": SCHEMA}}]
    ask: Any = [{"role": "user", "content": ASK}]
    with openai.OpenAI(base_url=gw.base_url, api_key=team.key, max_retries=0) as client:
        first = client.chat.completions.create(model=model, messages=ask, tools=tools)
        (call,) = first.choices[0].message.tool_calls or []
        assert json.loads(call.function.arguments) == {"word": "toll"}  # type: ignore[union-attr]
        history = [*ask, first.choices[0].message.model_dump(exclude_none=True)]
        history.append({"role": "tool", "tool_call_id": call.id, "content": ANSWER})
        second = client.chat.completions.create(model=model, messages=history, tools=tools)
    costs = [_micros(a.usage.model_extra["cost"]["credits"]) for a in (first, second)]  # type: ignore[union-attr,index]
    return second.choices[0].message.content or "", costs


def responses_tools(gw: Gateway, team: Team, model: str) -> tuple[str, list[int]]:
    tools: Any = [{"type": "function", "name": "lookup", "parameters": SCHEMA}]
    with openai.OpenAI(base_url=gw.base_url, api_key=team.key, max_retries=0) as client:
        first = client.responses.create(model=model, input=ASK, tools=tools)
        (call,) = [item for item in first.output if item.type == "function_call"]
        items: Any = [{"role": "user", "content": ASK}, call.model_dump(exclude_none=True)]
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": ANSWER})  # type: ignore[union-attr]
        second = client.responses.create(model=model, input=items, tools=tools)
    costs = [_micros(a.usage.model_extra["cost"]["credits"]) for a in (first, second)]  # type: ignore[union-attr,index]
    return second.output_text, costs


def messages_tools(gw: Gateway, team: Team, model: str) -> tuple[str, list[int]]:
    tools: Any = [{"name": "lookup", "input_schema": SCHEMA}]
    ask: Any = [{"role": "user", "content": ASK}]
    with anthropic.Anthropic(base_url=gw.root_url, api_key=team.key, max_retries=0) as claude:
        first = claude.messages.create(model=model, max_tokens=200, messages=ask, tools=tools)
        (use,) = [b for b in first.content if b.type == "tool_use"]
        result = {"type": "tool_result", "tool_use_id": use.id, "content": ANSWER}
        history = [*ask, {"role": "assistant", "content": first.content}, {"role": "user", "content": [result]}]
        second = claude.messages.create(model=model, max_tokens=200, messages=history, tools=tools)
    costs = [_micros(m.usage.model_extra["cost"]["credits"]) for m in (first, second)]  # type: ignore[index]
    return "".join(b.text for b in second.content if b.type == "text"), costs


def gemini_tools(gw: Gateway, team: Team, model: str) -> tuple[str, list[int]]:
    url, headers = f"{gw.root_url}/v1beta/models/{model}:generateContent", {"x-goog-api-key": team.key}
    tools = [{"functionDeclarations": [{"name": "lookup", "parametersJsonSchema": SCHEMA}]}]
    ask = [{"role": "user", "parts": [{"text": ASK}]}]
    first = plain_http.post(url, json={"contents": ask, "tools": tools}, headers=headers, timeout=30).json()
    said = first["candidates"][0]["content"]
    (call,) = [p["functionCall"] for p in said["parts"] if "functionCall" in p]
    assert call["args"] == {"word": "toll"}
    result = {"functionResponse": {"id": call.get("id"), "name": "lookup", "response": {"output": ANSWER}}}
    contents = [*ask, said, {"role": "user", "parts": [result]}]
    second = plain_http.post(url, json={"contents": contents, "tools": tools}, headers=headers, timeout=30).json()
    text = "".join(p.get("text", "") for p in second["candidates"][0]["content"]["parts"])
    return text, [_micros(a["usageMetadata"]["cost"]["credits"]) for a in (first, second)]


TOOL_ROUND_TRIP: dict[str, Callable[[Gateway, Team, str], tuple[str, list[int]]]] = {
    "chat": chat_tools,
    "responses": responses_tools,
    "messages": messages_tools,
    "gemini": gemini_tools,
}


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("model", KINDS)
def test_each_wire_calls_a_tool_through_each_provider(gateway: Gateway, teams: Teams, model: str, wire: str):
    team = teams.open("100")
    text, costs = TOOL_ROUND_TRIP[wire](gateway, team, model)
    assert text == f"Echo: tool result: {ANSWER}"
    assert costs == charged(gateway, team)
