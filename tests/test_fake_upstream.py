"""Prove the fake upstream is wire-faithful by driving it with the official openai SDK.

If the SDK (which is what real clients use against real OpenAI) parses the
fake's responses, streams and errors correctly, gateway tests built on the fake
exercise the same code paths as production.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.fake_upstream import FakeUpstream

MODEL = "gpt-x"
TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "echo back",
                                           "parameters": {"type": "object", "properties": {}}}}]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream() as f:
        yield f


@pytest.fixture
def client(fake: FakeUpstream) -> Iterator[openai.OpenAI]:
    fake.clear()
    with openai.OpenAI(base_url=fake.base_url, api_key="upstream-secret", max_retries=0, timeout=10) as c:
        yield c


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]


def test_models(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["gpt-x"]


def test_plain_completion(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model=MODEL, messages=user("hello big world [[cached:4]]"))
    assert r.object == "chat.completion" and r.model == MODEL and r.id.startswith("chatcmpl-")
    choice = r.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "Echo: hello big world"
    assert choice.finish_reason == "stop"
    assert r.usage is not None
    # system "be brief" = 2+3, user text (with directive) = 4 tokens + 3
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (12, 4, 16)
    assert r.usage.prompt_tokens_details is not None and r.usage.prompt_tokens_details.cached_tokens == 4


def test_content_parts_and_no_usage(client: openai.OpenAI) -> None:
    msgs = [{"role": "user", "content": [{"type": "text", "text": "part one "}, {"type": "text", "text": "two"}]}]
    r = client.chat.completions.create(model=MODEL, messages=msgs)  # type: ignore[arg-type]
    assert r.choices[0].message.content == "Echo: part one two"
    r = client.chat.completions.create(model=MODEL, messages=user("hi [[no-usage]]"))
    assert r.usage is None and r.choices[0].message.content == "Echo: hi"


def test_stream_include_usage(client: openai.OpenAI) -> None:
    plain = client.chat.completions.create(model=MODEL, messages=user("stream me please"))
    chunks = list(client.chat.completions.create(model=MODEL, messages=user("stream me please"), stream=True,
                                                 stream_options={"include_usage": True}))
    assert len({c.id for c in chunks}) == 1 and all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    with_usage = [c for c in chunks if c.usage is not None]
    assert len(with_usage) == 1 and with_usage[0] is chunks[-1] and chunks[-1].choices == []
    assert chunks[-1].usage == plain.usage
    assert [c.choices[0].finish_reason for c in chunks[:-1]][-1] == "stop"


def test_stream_without_usage_option(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(model=MODEL, messages=user("a b"), stream=True))
    assert all(c.choices for c in chunks) and all(c.usage is None for c in chunks)


def test_stream_helper_final_completion(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(model=MODEL, messages=user("helper works"),
                                        stream_options={"include_usage": True}) as s:
        final = s.get_final_completion()
    msg = final.choices[0].message
    assert msg.role == "assistant" and msg.content == "Echo: helper works"
    assert final.choices[0].finish_reason == "stop"
    assert final.usage is not None and final.usage.completion_tokens == 3


def test_tool_call_stream_helper(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(model=MODEL, messages=user("find cats [[tool:lookup]]"),
                                        tools=TOOLS) as s:  # type: ignore[arg-type]
        final = s.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = choice.message.tool_calls
    assert calls is not None and len(calls) == 1
    call = calls[0]
    assert call.id.startswith("call_") and len(call.id) == 13 and call.type == "function"
    assert call.function.name == "lookup"
    assert json.loads(call.function.arguments) == {"echo": "find cats"}
    assert final.usage is None  # include_usage not requested


def test_tool_call_non_streaming(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model=MODEL, messages=user("x y [[tool:lookup]]"),
                                       tools=TOOLS)  # type: ignore[arg-type]
    call = r.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert json.loads(call.function.arguments) == {"echo": "x y"}  # type: ignore[union-attr]
    assert r.usage is not None and r.usage.completion_tokens == 2 + 3


def test_tool_directive_ignored_without_tools(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model=MODEL, messages=user("no tools [[tool:lookup]]"))
    assert r.choices[0].message.content == "Echo: no tools" and r.choices[0].message.tool_calls is None


@pytest.mark.parametrize("kw", ["max_tokens", "max_completion_tokens"])
def test_truncation(client: openai.OpenAI, kw: str) -> None:
    r = client.chat.completions.create(model=MODEL, messages=user("one two three four"), **{kw: 2})
    assert r.choices[0].message.content == "Echo: one "
    assert r.choices[0].finish_reason == "length" and r.usage is not None and r.usage.completion_tokens == 2
    chunks = list(client.chat.completions.create(model=MODEL, messages=user("one two three four"),
                                                 stream=True, **{kw: 2}))
    assert chunks[-1].choices[0].finish_reason == "length"


def test_fail_503(client: openai.OpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as e:
        client.chat.completions.create(model=MODEL, messages=user("boom [[fail:503]]"))
    assert e.value.status_code == 503 and e.value.type == "server_error"


def test_fail_429(client: openai.OpenAI) -> None:
    with pytest.raises(openai.RateLimitError) as e:
        client.chat.completions.create(model=MODEL, messages=user("slow down [[fail:429]]"))
    assert e.value.response.headers["retry-after"] == "1"


def test_fail_400_and_missing_model(client: openai.OpenAI, fake: FakeUpstream) -> None:
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=user("[[fail:400]]"))
    r = httpx.post(f"{fake.base_url}/chat/completions", json={"messages": []},
                   headers={"Authorization": "Bearer upstream-secret"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


def test_wrong_key(fake: FakeUpstream) -> None:
    bad = openai.OpenAI(base_url=fake.base_url, api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        bad.chat.completions.create(model=MODEL, messages=user("hi"))
    assert e.value.code == "invalid_api_key"
    bad.close()


def test_drop_after_streaming(client: openai.OpenAI) -> None:
    got: list[str] = []
    with pytest.raises((httpx.RemoteProtocolError, openai.APIError)):
        for c in client.chat.completions.create(model=MODEL, messages=user("a b c d e [[drop-after:2]]"),
                                                stream=True, stream_options={"include_usage": True}):
            got.append(c.choices[0].delta.content or "")
    assert "".join(got) == "Echo: a "  # role chunk + 2 content chunks arrived before the break


def test_drop_non_streaming(client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model=MODEL, messages=user("x [[drop-after:0]]"))


def test_unknown_path(fake: FakeUpstream) -> None:
    r = httpx.get(f"{fake.base_url}/nope")
    assert r.status_code == 404 and r.json()["error"]["message"] == "Unknown path"


def test_requests_recorded(client: openai.OpenAI, fake: FakeUpstream) -> None:
    client.chat.completions.create(model=MODEL, messages=user("record me"))
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model=MODEL, messages=user("[[fail:500]]"))
    assert [(r.method, r.path) for r in fake.requests] == [("POST", "/v1/chat/completions")] * 2
    first = fake.requests[0]
    assert first.headers["authorization"] == "Bearer upstream-secret"
    assert first.body["model"] == MODEL and first.body["messages"][-1]["content"] == "record me"
    fake.clear()
    assert fake.requests == []
