"""Prove the fake upstream's Bedrock endpoints faithful: AWS's and Anthropic's own clients, pointed
straight at the fake — ``anthropic.AnthropicBedrock`` (the test credentials, region, ``base_url``) and
boto3's ``bedrock-runtime`` client (``endpoint_url``) — sign their requests with SigV4, get plain and
streamed answers in Bedrock's framing, and read a request signed with the wrong secret as Bedrock's
``InvalidSignatureException``."""

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
