"""Messages and Chat Completions clients against a `bedrock` deployment on the fake upstream's Bedrock
endpoints, through real sockets with the official SDKs: the model goes into the URL, the body gets
Bedrock's ``anthropic_version``, every request carries a SigV4 signature the fake recomputes, streams
come back in AWS's event-stream framing, and each answer's reported cost is its ledger charge.

Prices (100 credits per USD): bedrock-claude at Bedrock's regional $3.30/M input and $16.50/M output.
"hello there gateway" is 6 prompt tokens on the fake and its echo "Echo: hello there gateway" 4, so a
Messages request costs (6 × 3.3 + 4 × 16.5) × 100 = 8,580 micro-credits. Translated from Chat
Completions the prompt is the same 6 tokens: 8,580 too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import boto3
import openai
import pytest

from tests.support.charges import charged, reported
from tests.support.fake_bedrock import ACCESS_KEY, REGION, SECRET_KEY
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, verified_gateway, write_config
from tests.support.teams import Team, Teams, teams_of

MODEL_ID = "us.anthropic.claude-sonnet-4-20250514-v1:0"
HI = [{"role": "user", "content": "hello there gateway"}]
LOOKUP = {"name": "lookup", "input_schema": {"type": "object", "properties": {}}}
HELLO_MICROS = 8580
#: The AWS chain's environment, and nothing else it could find (no shared files, no instance role).
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": ACCESS_KEY,
    "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    "AWS_CONFIG_FILE": "/nonexistent/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def _bedrock_model(model_id: str, root: str, region: str) -> str:
    return f"""
[[models]]
id = "{model_id}"
display_name = "{model_id}"
owned_by = "anthropic"
context_window = 200000
max_output_tokens = 4096
pricing = {{input = 3.3, output = 16.5, cache_create = 4.125, cache_hit = 0.33}}
upstream = {{kind = "bedrock", region = "{region}", base_url = "{root}", model = "{MODEL_ID}"}}
"""


def config_with_bedrock(directory: Path, upstream_base_url: str) -> Path:
    config = write_config(directory, upstream_base_url)
    root = upstream_base_url.removesuffix("/v1")
    converse = _bedrock_model("bedrock-converse", root, REGION).replace(
        'kind = "bedrock",', 'kind = "bedrock", api = "converse",'
    )
    models = [
        _bedrock_model("bedrock-claude", root, REGION),
        _bedrock_model("bedrock-elsewhere", root, "eu-west-3"),
        converse,
    ]
    config.write_text(config.read_text() + "".join(models))
    return config


def started(directory: Path, fake: FakeUpstream, env: dict[str, str]) -> Iterator[Gateway]:
    yield from verified_gateway(config_with_bedrock(directory, fake.base_url), env)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    yield from started(tmp_path_factory.mktemp("bedrock"), fake_upstream, AWS_ENV)


@pytest.fixture(scope="module")
def teams(gateway: Gateway) -> Iterator[Teams]:
    yield from teams_of(gateway.config)


def billed(events: list[Any]) -> Any:
    """A passed-through stream's usage with Tollgate's cost: its message_delta's."""
    (delta,) = [event for event in events if event.type == "message_delta"]
    return delta.usage


def bedrock_call(fake: FakeUpstream, action: str = "invoke") -> Any:
    (sent,) = fake.requests
    assert sent.path == f"/model/{MODEL_ID}/{action}"
    assert sent.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/")
    assert f"/{REGION}/bedrock/aws4_request" in sent.headers["authorization"]
    assert sent.body["anthropic_version"] == "bedrock-2023-05-31"
    assert "model" not in sent.body
    assert "stream" not in sent.body
    assert "x-api-key" not in sent.headers
    return sent


def test_a_message_passes_through_to_the_model_in_the_url_and_is_charged_what_it_reports(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream
):
    message = claude.messages.create(
        model="bedrock-claude", max_tokens=100, messages=HI, extra_headers={"anthropic-beta": "tools-2024"}
    )
    assert message.content[0].text == "Echo: hello there gateway"
    assert message.model == "bedrock-claude"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (6, 4)
    sent = bedrock_call(fake_upstream)
    assert sent.body["anthropic_beta"] == ["tools-2024"]
    assert reported(message.usage) == HELLO_MICROS
    assert charged(gateway, team) == [HELLO_MICROS]


def test_a_streamed_message_is_read_from_the_event_stream(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream
):
    with claude.messages.stream(model="bedrock-claude", max_tokens=100, messages=HI) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert final.content[0].text == "Echo: hello there gateway"
    bedrock_call(fake_upstream, "invoke-with-response-stream")
    assert (final.usage.input_tokens, final.usage.output_tokens) == (6, 4)
    assert reported(billed(events)) == HELLO_MICROS
    assert charged(gateway, team) == [HELLO_MICROS]


def test_a_tool_round_trip_through_bedrock(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream
):
    """The first turn (the prompt and the tool's definition) is 6 prompt tokens on the fake and its tool
    call 5 output tokens: (6 × 3.3 + 5 × 16.5) × 100 = 10,230. The second sends the call and its result
    back, 19 prompt tokens, and gets a 6-token answer: (19 × 3.3 + 6 × 16.5) × 100 = 16,170."""
    ask = [{"role": "user", "content": "find it [[tool:lookup]]"}]
    with claude.messages.stream(model="bedrock-claude", max_tokens=100, messages=ask, tools=[LOOKUP]) as stream:
        events = list(stream)
        first = stream.get_final_message()
    (call,) = [block for block in first.content if block.type == "tool_use"]
    assert (call.name, first.stop_reason) == ("lookup", "tool_use")
    fake_upstream.clear()
    result = {"type": "tool_result", "tool_use_id": call.id, "content": "it is here"}
    turn = [*ask, {"role": "assistant", "content": first.content}, {"role": "user", "content": [result]}]
    second = claude.messages.create(model="bedrock-claude", max_tokens=100, messages=turn, tools=[LOOKUP])
    sent = bedrock_call(fake_upstream)
    assert sent.body["messages"][2]["content"][0]["tool_use_id"] == call.id
    costs = [reported(billed(events)), reported(second.usage)]
    assert (first.usage.input_tokens, first.usage.output_tokens) == (6, 5)
    assert (second.usage.input_tokens, second.usage.output_tokens) == (19, 6)
    assert costs == [10230, 16170]
    assert charged(gateway, team) == costs


def test_chat_completions_are_translated_for_bedrock(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    completion = client.chat.completions.create(model="bedrock-claude", messages=HI, max_tokens=100)
    assert completion.choices[0].message.content == "Echo: hello there gateway"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (6, 4)
    sent = bedrock_call(fake_upstream)
    assert sent.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello there gateway"}]}]
    assert reported(completion.usage) == HELLO_MICROS
    assert charged(gateway, team) == [HELLO_MICROS]


def test_a_streamed_chat_completion_is_translated_from_the_event_stream(
    gateway: Gateway, team: Team, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    stream = client.chat.completions.create(
        model="bedrock-claude", messages=HI, max_tokens=100, stream=True, stream_options={"include_usage": True}
    )
    with stream:
        chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Echo: hello there gateway"
    bedrock_call(fake_upstream, "invoke-with-response-stream")
    usage = chunks[-1].usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (6, 4)
    assert reported(usage) == HELLO_MICROS
    assert charged(gateway, team) == [HELLO_MICROS]


def test_a_refused_signature_is_an_error_in_each_wire_and_charges_nothing(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, client: openai.OpenAI, fake_upstream: FakeUpstream
):
    """bedrock-elsewhere signs for eu-west-3; the fake (us-east-1) refuses the signature, as Bedrock does."""
    with pytest.raises(anthropic.APIStatusError) as refused:
        claude.messages.create(model="bedrock-elsewhere", max_tokens=100, messages=HI)
    assert refused.value.status_code == 502
    assert refused.value.body["type"] == "error"
    assert "credentials" in refused.value.body["error"]["message"]
    with pytest.raises(openai.APIStatusError) as failed:
        client.chat.completions.create(model="bedrock-elsewhere", messages=HI, stream=True)
    assert failed.value.status_code == 502
    assert "credentials" in failed.value.body["message"]
    assert [r.path for r in fake_upstream.requests] == [
        f"/model/{MODEL_ID}/invoke",
        f"/model/{MODEL_ID}/invoke-with-response-stream",
    ]
    assert charged(gateway, team) == []


def test_a_wrong_secret_is_refused_and_charges_nothing(tmp_path: Path, teams: Teams, fake_upstream: FakeUpstream):
    """A second gateway whose environment holds another secret: every signature it makes is refused."""
    for wrong in started(tmp_path, fake_upstream, {**AWS_ENV, "AWS_SECRET_ACCESS_KEY": "not-the-secret"}):
        team = Teams(wrong.config)
        try:
            holder = team.open("100")
            with (
                anthropic.Anthropic(base_url=wrong.root_url, api_key=holder.key, max_retries=0) as c,
                pytest.raises(anthropic.APIStatusError) as refused,
            ):
                c.messages.create(model="bedrock-claude", max_tokens=100, messages=HI)
            assert refused.value.status_code == 502
            assert charged(wrong, holder) == []
        finally:
            team.close()


def test_a_mid_stream_exception_reaches_the_client_as_an_error_event(claude: anthropic.Anthropic):
    """The fake sends the stream's failure as Bedrock does, an exception message, not a chunk."""
    ask = [{"role": "user", "content": "one two three [[stream-error]]"}]
    with (
        pytest.raises(anthropic.APIStatusError) as error,
        claude.messages.stream(model="bedrock-claude", max_tokens=100, messages=ask) as stream,
    ):
        list(stream)
    assert "modelStreamErrorException" in str(error.value)


def test_bedrocks_throttling_is_a_429_and_charges_nothing(gateway: Gateway, team: Team, client: openai.OpenAI):
    with pytest.raises(openai.RateLimitError) as throttled:
        client.chat.completions.create(model="bedrock-claude", messages=[{"role": "user", "content": "x [[fail:429]]"}])
    assert "rate limiting" in throttled.value.body["message"]
    assert charged(gateway, team) == []


@pytest.mark.parametrize("action", ["invoke", "converse"])
def test_the_request_is_the_one_aws_s_own_sdk_sends(
    gateway: Gateway, team: Team, claude: anthropic.Anthropic, fake_upstream: FakeUpstream, action: str
):
    """The model id percent-encoded in the path byte for byte as botocore sends it (``:`` as ``%3A``),
    signed over that path, with the headers AWS's SDKs sign."""
    sdk = boto3.client(
        "bedrock-runtime",
        endpoint_url=fake_upstream.anthropic_base_url,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )
    if action == "invoke":
        body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 100, "messages": HI}
        sdk.invoke_model(
            modelId=MODEL_ID, body=json.dumps(body), contentType="application/json", accept="application/json"
        )
    else:
        sdk.converse(modelId=MODEL_ID, messages=[{"role": "user", "content": [{"text": "hello there gateway"}]}])
    (by_sdk,) = fake_upstream.requests
    fake_upstream.clear()
    if action == "invoke":
        claude.messages.create(model="bedrock-claude", max_tokens=100, messages=HI)
    else:
        claude.messages.create(model="bedrock-converse", max_tokens=100, messages=HI)
    (by_gateway,) = fake_upstream.requests
    assert by_gateway.raw_path == by_sdk.raw_path == f"/model/{MODEL_ID.replace(':', '%3A')}/{action}"
    signed = by_gateway.headers["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "x-amz-date"} <= set(signed)
    assert by_sdk.headers["authorization"].split(" ")[0] == by_gateway.headers["authorization"].split(" ")[0]
