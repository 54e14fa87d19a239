"""Prove the fake upstream's Bedrock endpoints faithful: AWS's and Anthropic's own clients, pointed
straight at the fake — ``anthropic.AnthropicBedrock`` (the test credentials, region, ``base_url``) and
boto3's ``bedrock-runtime`` client (``endpoint_url``) — sign their requests with SigV4, get plain and
streamed answers in Bedrock's framing, and read a request signed with the wrong secret as Bedrock's
``InvalidSignatureException``; boto3's ``converse`` and ``converse_stream`` get a Llama model's answers,
its tool calls and a mid-stream exception in Converse's shapes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import boto3
import botocore.exceptions
import pytest
from botocore.config import Config

from tests.support.fake_bedrock import ACCESS_KEY, REGION, SECRET_KEY, VERSION
from tests.support.fake_upstream import FakeUpstream

MODEL = "us.anthropic.claude-sonnet-4-20250514-v1:0"
HELLO = [{"role": "user", "content": "hello there bedrock"}]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream() as f:
        yield f


def claude(fake: FakeUpstream, secret: str = SECRET_KEY) -> anthropic.AnthropicBedrock:
    return anthropic.AnthropicBedrock(
        aws_access_key=ACCESS_KEY,
        aws_secret_key=secret,
        aws_region=REGION,
        base_url=fake.anthropic_base_url,
        max_retries=0,
        timeout=10,
    )


def runtime(fake: FakeUpstream, secret: str = SECRET_KEY) -> Any:
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=fake.anthropic_base_url,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=secret,
        config=Config(retries={"total_max_attempts": 1}),
    )


def test_the_anthropic_bedrock_client_gets_a_message(fake: FakeUpstream):
    fake.clear()
    with claude(fake) as client:
        message = client.messages.create(model=MODEL, max_tokens=50, messages=HELLO)
    assert message.content[0].text == "Echo: hello there bedrock"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (6, 4)
    (sent,) = fake.requests
    assert sent.path == f"/model/{MODEL}/invoke"
    assert sent.body["anthropic_version"]  # the SDK's own (2.x sends the Messages API's dated version)
    assert "model" not in sent.body
    assert sent.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/")


def test_the_anthropic_bedrock_client_reads_the_event_stream_and_a_tool_call(fake: FakeUpstream):
    tool = {"name": "lookup", "input_schema": {"type": "object", "properties": {}}}
    ask = [{"role": "user", "content": "find it [[tool:lookup]]"}]
    with claude(fake) as client, client.messages.stream(model=MODEL, max_tokens=50, messages=ask, tools=[tool]) as s:
        final = s.get_final_message()
    assert final.stop_reason == "tool_use"
    assert final.content[-1].type == "tool_use"
    assert final.content[-1].name == "lookup"
    assert final.usage.output_tokens > 0


def test_a_wrong_secret_is_bedrocks_invalid_signature(fake: FakeUpstream):
    with claude(fake, secret="not-the-secret") as client, pytest.raises(anthropic.PermissionDeniedError) as raised:
        client.messages.create(model=MODEL, max_tokens=50, messages=HELLO)
    assert raised.value.response.headers["x-amzn-errortype"].startswith("InvalidSignatureException")
    assert raised.value.body["message"].startswith("The request signature we calculated does not match")


def test_boto3_invokes_the_model(fake: FakeUpstream):
    fake.clear()
    body = json.dumps({"anthropic_version": VERSION, "max_tokens": 50, "messages": HELLO})
    client = runtime(fake)
    try:
        answer = client.invoke_model(modelId=MODEL, body=body, contentType="application/json")
        message = json.loads(answer["body"].read())
    finally:
        client.close()
    assert message["content"][0]["text"] == "Echo: hello there bedrock"
    assert message["type"] == "message"
    (sent,) = fake.requests
    assert sent.path == f"/model/{MODEL}/invoke"


def test_boto3_reads_the_stream_with_bedrocks_invocation_metrics(fake: FakeUpstream):
    body = json.dumps({"anthropic_version": VERSION, "max_tokens": 50, "messages": HELLO})
    client = runtime(fake)
    try:
        answer = client.invoke_model_with_response_stream(modelId=MODEL, body=body)
        events = [json.loads(event["chunk"]["bytes"]) for event in answer["body"]]
    finally:
        client.close()
    kinds = [event["type"] for event in events]
    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["message_delta", "message_stop"]
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert text == "Echo: hello there bedrock"
    metrics = events[-1]["amazon-bedrock-invocationMetrics"]
    assert (metrics["inputTokenCount"], metrics["outputTokenCount"]) == (6, 4)


def test_boto3_reads_a_mid_stream_error_as_an_exception_event(fake: FakeUpstream):
    ask = [{"role": "user", "content": "hello [[stream-error]]"}]
    client = runtime(fake)
    try:
        answer = client.invoke_model_with_response_stream(
            modelId=MODEL, body=json.dumps({"anthropic_version": VERSION, "max_tokens": 50, "messages": ask})
        )
        with pytest.raises(botocore.exceptions.EventStreamError) as raised:
            list(answer["body"])
        answer["body"].close()  # the error ends the reading, not the connection
    finally:
        client.close()
    assert raised.value.response["Error"]["Code"] == "modelStreamErrorException"


def test_boto3_with_a_wrong_secret_or_a_model_in_the_body_is_refused(fake: FakeUpstream):
    body = json.dumps({"anthropic_version": VERSION, "max_tokens": 50, "messages": HELLO})
    client, good = runtime(fake, secret="not-the-secret"), runtime(fake)
    try:
        with pytest.raises(botocore.exceptions.ClientError) as raised:
            client.invoke_model(modelId=MODEL, body=body)
        assert raised.value.response["Error"]["Code"] == "InvalidSignatureException"
        wrong = json.dumps({"anthropic_version": VERSION, "model": MODEL, "max_tokens": 50, "messages": HELLO})
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            good.invoke_model(modelId=MODEL, body=wrong)
        assert refused.value.response["Error"]["Code"] == "ValidationException"
    finally:
        client.close()
        good.close()


LLAMA = "us.meta.llama3-3-70b-instruct-v1:0"
ASK = [{"role": "user", "content": [{"text": "hello there bedrock"}]}]
LOOKUP = {"toolSpec": {"name": "lookup", "inputSchema": {"json": {"type": "object", "properties": {}}}}}


def test_boto3_converses_with_a_cross_region_profile(fake: FakeUpstream):
    fake.clear()
    client = runtime(fake)
    try:
        answer = client.converse(modelId=LLAMA, messages=ASK, inferenceConfig={"maxTokens": 50})
    finally:
        client.close()
    assert answer["output"]["message"]["content"] == [{"text": "Echo: hello there bedrock"}]
    assert answer["stopReason"] == "end_turn"
    assert answer["usage"] == {"inputTokens": 6, "outputTokens": 4, "totalTokens": 10}
    (sent,) = fake.requests
    assert sent.path in (f"/model/{LLAMA}/converse", "/model/us.meta.llama3-3-70b-instruct-v1%3A0/converse")
    assert sent.body["inferenceConfig"] == {"maxTokens": 50}


def test_boto3_converses_with_a_tool(fake: FakeUpstream):
    ask = [{"role": "user", "content": [{"text": "find it [[tool:lookup]]"}]}]
    client = runtime(fake)
    try:
        answer = client.converse(modelId=LLAMA, messages=ask, toolConfig={"tools": [LOOKUP]})
    finally:
        client.close()
    assert answer["stopReason"] == "tool_use"
    use = answer["output"]["message"]["content"][-1]["toolUse"]
    assert use["name"] == "lookup"
    assert isinstance(use["input"], dict)


def test_boto3_reads_the_converse_stream_with_a_tool_call(fake: FakeUpstream):
    ask = [{"role": "user", "content": [{"text": "find it [[tool:lookup]]"}]}]
    client = runtime(fake)
    try:
        answer = client.converse_stream(modelId=LLAMA, messages=ask, toolConfig={"tools": [LOOKUP]})
        events = list(answer["stream"])
    finally:
        client.close()
    kinds = [next(iter(event)) for event in events]
    assert kinds[0] == "messageStart"
    assert kinds[-2:] == ["messageStop", "metadata"]
    starts = [e["contentBlockStart"]["start"]["toolUse"] for e in events if "contentBlockStart" in e]
    assert [start["name"] for start in starts] == ["lookup"]
    arguments = "".join(
        e["contentBlockDelta"]["delta"].get("toolUse", {}).get("input", "") for e in events if "contentBlockDelta" in e
    )
    assert isinstance(json.loads(arguments), dict)
    assert events[-2]["messageStop"]["stopReason"] == "tool_use"
    usage = events[-1]["metadata"]["usage"]
    assert usage["outputTokens"] > 0
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]


def test_boto3_reads_a_converse_stream_error_as_an_exception_event(fake: FakeUpstream):
    ask = [{"role": "user", "content": [{"text": "hello [[stream-error]]"}]}]
    client = runtime(fake)
    try:
        answer = client.converse_stream(modelId=LLAMA, messages=ask)
        with pytest.raises(botocore.exceptions.EventStreamError) as raised:
            list(answer["stream"])
        answer["stream"].close()
    finally:
        client.close()
    assert raised.value.response["Error"]["Code"] == "modelStreamErrorException"


def test_a_converse_request_with_a_wrong_secret_is_refused(fake: FakeUpstream):
    client = runtime(fake, secret="not-the-secret")
    try:
        with pytest.raises(botocore.exceptions.ClientError) as raised:
            client.converse(modelId=LLAMA, messages=ASK)
    finally:
        client.close()
    assert raised.value.response["Error"]["Code"] == "InvalidSignatureException"
