"""The fake Gemini API (tests/support/fake_gemini.py) answers as Google's does: Google's own SDK,
``google.genai.Client``, pointed at it, generates, streams, calls a function, counts tokens and lists
models, and reads its refusals as Google's ``APIError``s. What the gateway is tested against is
only as faithful as this."""

from __future__ import annotations

import pytest
from google import genai
from google.genai import errors, types

from tests.support.fake_upstream import FakeUpstream

LOOKUP = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="lookup", description="Look a word up", parameters_json_schema={"type": "object", "properties": {}}
        )
    ]
)


def _client(fake_upstream: FakeUpstream, key: str | None = None) -> genai.Client:
    options = types.HttpOptions(base_url=fake_upstream.anthropic_base_url, api_version="v1beta")
    return genai.Client(api_key=key or fake_upstream.api_key, http_options=options)


def test_generate_content_echoes_with_usage(fake_upstream: FakeUpstream):
    client = _client(fake_upstream)  # kept: the SDK closes its connections once the client is collected
    answer = client.models.generate_content(model="gemini-x", contents="hello there gateway")
    assert answer.text == "Echo: hello there gateway"
    assert answer.usage_metadata is not None
    assert answer.usage_metadata.prompt_token_count == 3
    assert answer.usage_metadata.candidates_token_count == 4
    assert answer.candidates is not None
    assert answer.candidates[0].finish_reason == types.FinishReason.STOP


def test_a_stream_comes_token_by_token_and_ends_with_its_usage(fake_upstream: FakeUpstream):
    client = _client(fake_upstream)
    chunks = list(client.models.generate_content_stream(model="gemini-x", contents="hello there"))
    assert "".join(c.text or "" for c in chunks) == "Echo: hello there"
    assert len(chunks) == 4  # three words, then the finish
    last = chunks[-1]
    assert last.usage_metadata is not None
    assert last.usage_metadata.candidates_token_count == 3
    assert last.candidates is not None
    assert last.candidates[0].finish_reason == types.FinishReason.STOP


def test_a_function_call_and_its_response(fake_upstream: FakeUpstream):
    client = _client(fake_upstream)
    config = types.GenerateContentConfig(tools=[LOOKUP])
    first = client.models.generate_content(
        model="gemini-x", contents='find it [[tool:lookup {"word": "toll"}]]', config=config
    )
    assert first.function_calls is not None
    (call,) = first.function_calls
    assert (call.name, call.args) == ("lookup", {"word": "toll"})
    assert first.candidates is not None
    assert first.candidates[0].content is not None
    history = [
        types.Content(role="user", parts=[types.Part(text="find it")]),
        first.candidates[0].content,
        types.Content(
            role="user",
            parts=[types.Part.from_function_response(name="lookup", response={"output": "a fee for passing"})],
        ),
    ]
    second = client.models.generate_content(model="gemini-x", contents=history, config=config)
    assert second.text == "Echo: tool result: a fee for passing"


def test_count_tokens_and_models(fake_upstream: FakeUpstream):
    client = _client(fake_upstream)
    assert client.models.count_tokens(model="gemini-x", contents="one two three").total_tokens == 3
    assert [m.name for m in client.models.list()] == ["models/gemini-x"]


@pytest.mark.parametrize(
    ("contents", "key", "code", "status"),
    [
        ("hello", "wrong-key", 403, "PERMISSION_DENIED"),
        ("hello [[fail:429]]", None, 429, "RESOURCE_EXHAUSTED"),
        ("hello [[fail:503]]", None, 503, "UNAVAILABLE"),
    ],
)
def test_refusals_are_googles_errors(
    fake_upstream: FakeUpstream, contents: str, key: str | None, code: int, status: str
):
    client = _client(fake_upstream, key)
    with pytest.raises(errors.APIError) as raised:
        client.models.generate_content(
            model="gemini-x",
            contents=contents,
            config=types.GenerateContentConfig(
                http_options=types.HttpOptions(retry_options=types.HttpRetryOptions(attempts=1))
            ),
        )
    assert (raised.value.code, raised.value.status) == (code, status)
