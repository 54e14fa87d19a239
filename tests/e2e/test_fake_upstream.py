"""Prove the fake upstream is wire-faithful by driving it with the official openai SDK.

If the SDK (which is what real clients use against real OpenAI) parses the
fake's responses, streams and errors correctly, gateway tests built on the fake
exercise the same code paths as production.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from tests.support import plain_http
from tests.support.children import end_server, start_server
from tests.support.fake_upstream import FakeUpstream

MODEL = "gpt-x"
TOOLS = [
    {
        "type": "function",
        "function": {"name": "lookup", "description": "echo back", "parameters": {"type": "object", "properties": {}}},
    }
]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream() as f:
        yield f


@pytest.fixture
def client(fake: FakeUpstream) -> Iterator[openai.OpenAI]:
    fake.clear()
    with openai.OpenAI(base_url=fake.base_url, api_key="upstream-secret", max_retries=0, timeout=10) as c:
        yield c


def user(text: str) -> list[ChatCompletionMessageParam]:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]


def test_models(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["gpt-x"]


def test_plain_completion(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model=MODEL, messages=user("hello big world [[cached:4]]"))
    assert r.object == "chat.completion"
    assert r.model == MODEL
    assert r.id.startswith("chatcmpl-")
    choice = r.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "Echo: hello big world"
    assert choice.finish_reason == "stop"
    assert r.usage is not None
    # system "be brief" = 2+3, user text (with directive) = 4 tokens + 3
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (12, 4, 16)
    assert r.usage.prompt_tokens_details is not None
    assert r.usage.prompt_tokens_details.cached_tokens == 4


def test_content_parts_and_no_usage(client: openai.OpenAI) -> None:
    msgs = [{"role": "user", "content": [{"type": "text", "text": "part one "}, {"type": "text", "text": "two"}]}]
    r = client.chat.completions.create(model=MODEL, messages=msgs)  # type: ignore[arg-type]
    assert r.choices[0].message.content == "Echo: part one two"
    r = client.chat.completions.create(model=MODEL, messages=user("hi [[no-usage]]"))
    assert r.usage is None
    assert r.choices[0].message.content == "Echo: hi"


def test_stream_include_usage(client: openai.OpenAI) -> None:
    plain = client.chat.completions.create(model=MODEL, messages=user("stream me please"))
    chunks = list(
        client.chat.completions.create(
            model=MODEL, messages=user("stream me please"), stream=True, stream_options={"include_usage": True}
        )
    )
    assert len({c.id for c in chunks}) == 1
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    with_usage = [c for c in chunks if c.usage is not None]
    assert len(with_usage) == 1
    assert with_usage[0] is chunks[-1]
    assert chunks[-1].choices == []
    assert chunks[-1].usage == plain.usage
    assert [c.choices[0].finish_reason for c in chunks[:-1]][-1] == "stop"


def test_stream_without_usage_option(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(model=MODEL, messages=user("a b"), stream=True))
    assert all(c.choices for c in chunks)
    assert all(c.usage is None for c in chunks)


def test_stream_helper_final_completion(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(
        model=MODEL, messages=user("helper works"), stream_options={"include_usage": True}
    ) as s:
        final = s.get_final_completion()
    msg = final.choices[0].message
    assert msg.role == "assistant"
    assert msg.content == "Echo: helper works"
    assert final.choices[0].finish_reason == "stop"
    assert final.usage is not None
    assert final.usage.completion_tokens == 3


def test_tool_call_stream_helper(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(model=MODEL, messages=user("find cats [[tool:lookup]]"), tools=TOOLS) as s:  # type: ignore[arg-type]
        final = s.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert calls is not None
    assert len(calls) == 1
    call = calls[0]
    assert call.id.startswith("call_")
    assert len(call.id) == 13
    assert call.type == "function"
    assert call.function.name == "lookup"
    assert json.loads(call.function.arguments) == {"echo": "find cats"}
    assert final.usage is None  # include_usage not requested


def test_tool_call_non_streaming(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model=MODEL, messages=user("x y [[tool:lookup]]"), tools=TOOLS)  # type: ignore[arg-type]
    call = r.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert json.loads(call.function.arguments) == {"echo": "x y"}  # type: ignore[union-attr]
    assert r.usage is not None
    assert r.usage.completion_tokens == 2 + 3


def test_tool_directive_ignored_without_tools(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model=MODEL, messages=user("no tools [[tool:lookup]]"))
    assert r.choices[0].message.content == "Echo: no tools"
    assert r.choices[0].message.tool_calls is None


@pytest.mark.parametrize("kw", ["max_tokens", "max_completion_tokens"])
def test_truncation(client: openai.OpenAI, kw: str) -> None:
    r = client.chat.completions.create(model=MODEL, messages=user("one two three four"), **{kw: 2})
    assert r.choices[0].message.content == "Echo: one "
    assert r.choices[0].finish_reason == "length"
    assert r.usage is not None
    assert r.usage.completion_tokens == 2
    chunks = list(
        client.chat.completions.create(model=MODEL, messages=user("one two three four"), stream=True, **{kw: 2})
    )
    assert chunks[-1].choices[0].finish_reason == "length"


def test_fail_503(client: openai.OpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as e:
        client.chat.completions.create(model=MODEL, messages=user("boom [[fail:503]]"))
    assert e.value.status_code == 503
    assert e.value.type == "server_error"


def test_fail_429(client: openai.OpenAI) -> None:
    with pytest.raises(openai.RateLimitError) as e:
        client.chat.completions.create(model=MODEL, messages=user("slow down [[fail:429]]"))
    assert e.value.response.headers["retry-after"] == "1"


def test_fail_400_and_missing_model(client: openai.OpenAI, fake: FakeUpstream) -> None:
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=user("[[fail:400]]"))
    r = plain_http.post(
        f"{fake.base_url}/chat/completions", json={"messages": []}, headers={"Authorization": "Bearer upstream-secret"}
    )
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_wrong_key(fake: FakeUpstream) -> None:
    with openai.OpenAI(base_url=fake.base_url, api_key="nope", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError) as e:
            bad.chat.completions.create(model=MODEL, messages=user("hi"))
        assert e.value.code == "invalid_api_key"
        bad.close()


def test_drop_after_streaming(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL, messages=user("a b c d e [[drop-after:2]]"), stream=True, stream_options={"include_usage": True}
    )
    got: list[str] = []
    with pytest.raises((httpx.RemoteProtocolError, openai.APIError)):
        got.extend(c.choices[0].delta.content or "" for c in stream)  # keeps what came before the break
    assert "".join(got) == "Echo: a "  # role chunk + 2 content chunks arrived before the break


def test_drop_non_streaming(client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model=MODEL, messages=user("x [[drop-after:0]]"))


def test_unknown_path(fake: FakeUpstream) -> None:
    r = plain_http.get(f"{fake.base_url}/nope")
    assert r.status_code == 404
    assert r.json()["error"]["message"] == "Unknown path"


def test_requests_recorded(client: openai.OpenAI, fake: FakeUpstream) -> None:
    client.chat.completions.create(model=MODEL, messages=user("record me"))
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model=MODEL, messages=user("[[fail:500]]"))
    assert [(r.method, r.path) for r in fake.requests] == [("POST", "/v1/chat/completions")] * 2
    first = fake.requests[0]
    assert first.headers["authorization"] == "Bearer upstream-secret"
    assert first.body["model"] == MODEL
    assert first.body["messages"][-1]["content"] == "record me"
    fake.clear()
    assert fake.requests == []


# -- OpenAI side: cache writes, reasoning, tool results, stop strings, validation -------------------


def test_cache_write_and_reasoning_tokens(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model=MODEL, messages=user("a b [[cached:2]] [[cache-write:3]] [[reason:5]]"))
    assert r.choices[0].message.content == "Echo: a b"
    assert r.usage is not None
    # system 2+3, user 5 tokens + 3; completion = 3 visible + 5 reasoning
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (13, 8, 21)
    details = r.usage.prompt_tokens_details
    assert details is not None
    assert (details.cached_tokens, details.cache_write_tokens) == (2, 3)
    assert r.usage.completion_tokens_details is not None
    assert r.usage.completion_tokens_details.reasoning_tokens == 5
    plain = client.chat.completions.create(model=MODEL, messages=user("a b"))
    assert plain.usage is not None
    assert plain.usage.prompt_tokens_details is not None
    assert plain.usage.prompt_tokens_details.cache_write_tokens is None  # only reported when directed
    assert plain.usage.completion_tokens_details.reasoning_tokens == 0  # type: ignore[union-attr]


def test_tool_result_turn_is_echoed(client: openai.OpenAI) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    msgs = [
        {"role": "user", "content": "find it [[tool:lookup]]"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
    ]
    r = client.chat.completions.create(model=MODEL, messages=msgs, tools=TOOLS)  # type: ignore[arg-type]
    assert r.choices[0].message.content == "Echo: tool result: 42"
    assert r.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("stop", ["three", ["nope", "two", "three"]])
def test_stop_strings_cut_the_reply(client: openai.OpenAI, stop: str | list[str]) -> None:
    r = client.chat.completions.create(model=MODEL, messages=user("one two three four"), stop=stop)
    expected = "Echo: one " if isinstance(stop, list) else "Echo: one two "
    assert r.choices[0].message.content == expected
    assert r.choices[0].finish_reason == "stop"
    chunks = list(
        client.chat.completions.create(model=MODEL, messages=user("one two three four"), stop=stop, stream=True)
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == expected


def _tool_turn(**overrides: object) -> list[dict[str, object]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    return [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "42", **overrides},
    ]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": "x"}], "temperature": 2.5}, "temperature"),
        ({"messages": [{"role": "user", "content": "x"}], "temperature": -0.1}, "temperature"),
        ({"messages": _tool_turn(tool_call_id=None)}, "messages[2].tool_call_id"),
        ({"messages": _tool_turn(tool_call_id="call_other")}, "messages[2].role"),
        ({"messages": [{"role": "tool", "tool_call_id": "call_1", "content": "42"}]}, "messages[0].role"),
        (
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": {}}}
                        ],
                    },
                ]
            },
            "messages[1].tool_calls[0].function.arguments",
        ),
    ],
)
def test_openai_validation(fake: FakeUpstream, body: dict[str, object], param: str) -> None:
    fake.clear()
    r = plain_http.post(
        f"{fake.base_url}/chat/completions",
        json={"model": MODEL, **body},
        headers={"Authorization": "Bearer upstream-secret"},
    )
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert r.json()["error"]["param"] == param
    assert len(fake.requests) == 1  # failures are recorded too


# -- Anthropic Messages side, driven by the official anthropic SDK ----------------------------------

CLAUDE = "claude-x"
LOOKUP = {"name": "lookup", "description": "echo back", "input_schema": {"type": "object", "properties": {}}}
THINKING = {"type": "enabled", "budget_tokens": 1024}


@pytest.fixture
def claude(fake: FakeUpstream) -> Iterator[anthropic.Anthropic]:
    fake.clear()
    with anthropic.Anthropic(
        base_url=fake.anthropic_base_url, api_key="upstream-secret", max_retries=0, timeout=10
    ) as c:
        yield c


def say(text: str) -> list[dict[str, object]]:
    return [{"role": "user", "content": text}]


def text_of(m: anthropic.types.Message) -> str:
    return "".join(b.text for b in m.content if b.type == "text")


def test_anthropic_create(claude: anthropic.Anthropic, fake: FakeUpstream) -> None:
    m = claude.messages.create(
        model=CLAUDE, max_tokens=100, system="be brief", messages=say("hello big world [[cached:4]] [[cache-write:2]]")
    )
    assert m.id.startswith("msg_")
    assert m.type == "message"
    assert m.role == "assistant"
    assert m.model == CLAUDE
    assert [b.type for b in m.content] == ["text"]
    assert text_of(m) == "Echo: hello big world"
    assert (m.stop_reason, m.stop_sequence) == ("end_turn", None)
    # prompt: system 2 + (5 tokens + 3) = 10, of which 4 read from and 2 written to the cache
    u = m.usage
    assert (u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens, u.output_tokens) == (4, 4, 2, 4)
    assert fake.anthropic_base_url == fake.base_url.removesuffix("/v1")
    (sent,) = fake.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["anthropic-version"] == "2026-10-21"
    assert sent.headers["authorization"] == "Bearer upstream-secret"  # 2.x sends no x-api-key


def test_anthropic_stop_reasons(claude: anthropic.Anthropic) -> None:
    m = claude.messages.create(model=CLAUDE, max_tokens=2, messages=say("one two three four"))
    assert (text_of(m), m.stop_reason, m.stop_sequence) == ("Echo: one ", "max_tokens", None)
    assert m.usage.output_tokens == 2
    m = claude.messages.create(
        model=CLAUDE, max_tokens=100, messages=say("one two three four"), stop_sequences=["four", "three"]
    )
    assert (text_of(m), m.stop_reason, m.stop_sequence) == ("Echo: one two ", "stop_sequence", "three")


def test_anthropic_stream_matches_create(claude: anthropic.Anthropic) -> None:
    msgs = say("stream me please [[cached:1]]")
    plain = claude.messages.create(model=CLAUDE, max_tokens=100, messages=msgs)
    with claude.messages.stream(model=CLAUDE, max_tokens=100, messages=msgs) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == "Echo: stream me please"
    assert [b.to_dict() for b in final.content] == [b.to_dict() for b in plain.content]
    assert (final.stop_reason, final.stop_sequence) == (plain.stop_reason, plain.stop_sequence)
    assert final.usage == plain.usage
    assert final.usage.cache_read_input_tokens == 1


def test_anthropic_tool_use_stream_then_tool_result(claude: anthropic.Anthropic) -> None:
    with claude.messages.stream(
        model=CLAUDE,
        max_tokens=100,
        tools=[LOOKUP],  # type: ignore[list-item]
        messages=say("find cats [[tool:lookup]]"),
    ) as s:
        final = s.get_final_message()
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.stop_reason == "tool_use"
    use = final.content[1]
    assert use.type == "tool_use"
    assert use.name == "lookup"
    assert use.id.startswith("toolu_")
    assert use.input == {"echo": "find cats"}  # accumulated from input_json_delta fragments into a dict
    assert final.usage.output_tokens == 2 + len(json.dumps(use.input).split())
    reply = claude.messages.create(
        model=CLAUDE,
        max_tokens=100,
        tools=[LOOKUP],
        messages=[  # type: ignore[list-item]
            *say("find cats [[tool:lookup]]"),
            {"role": "assistant", "content": [b.to_dict() for b in final.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "42"}]},
        ],
    )
    assert text_of(reply) == "Echo: tool result: 42"
    assert reply.stop_reason == "end_turn"


def test_anthropic_thinking(claude: anthropic.Anthropic) -> None:
    with claude.messages.stream(
        model=CLAUDE,
        max_tokens=2000,
        thinking=THINKING,  # type: ignore[arg-type]
        messages=say("ponder this [[think]]"),
    ) as s:
        final = s.get_final_message()
    thinking, text = final.content
    assert thinking.type == "thinking"
    assert thinking.thinking == "Thinking about: ponder this"
    assert thinking.signature.startswith("sig_")
    assert len(thinking.signature) > 4
    assert text.type == "text"
    assert text.text == "Echo: ponder this"
    assert final.usage.output_tokens == 4 + 3
    plain = claude.messages.create(model=CLAUDE, max_tokens=100, messages=say("ponder this [[think]]"))
    assert [b.type for b in plain.content] == ["text"]  # no thinking unless the request enables it


def test_anthropic_count_tokens(claude: anthropic.Anthropic, fake: FakeUpstream) -> None:
    n = claude.messages.count_tokens(model=CLAUDE, system="be brief", messages=say("hello there gateway"))
    assert n.input_tokens == 2 + 3 + 3
    tool_turn = [
        *say("go"),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a b"}]}
            ],
        },
    ]
    n = claude.messages.count_tokens(model=CLAUDE, messages=tool_turn)  # type: ignore[arg-type]
    assert n.input_tokens == (1 + 3) + (2 + 3) + (2 + 3)  # '{"q": "x"}' is two tokens
    assert [r.path for r in fake.requests] == ["/v1/messages/count_tokens"] * 2


@pytest.mark.parametrize(
    ("code", "error", "type_"),
    [
        (529, anthropic.OverloadedError, "overloaded_error"),
        (503, anthropic.ServiceUnavailableError, "overloaded_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (403, anthropic.PermissionDeniedError, "permission_error"),
        (404, anthropic.NotFoundError, "not_found_error"),
        (400, anthropic.BadRequestError, "invalid_request_error"),
    ],
)
def test_anthropic_fail_directive(claude: anthropic.Anthropic, code: int, error: type[Exception], type_: str) -> None:
    with pytest.raises(error) as e:
        claude.messages.create(model=CLAUDE, max_tokens=10, messages=say(f"boom [[fail:{code}]]"))
    err = e.value
    assert isinstance(err, anthropic.APIStatusError)
    assert err.status_code == code
    assert err.type == type_
    assert err.body["type"] == "error"
    assert err.request_id == "req_fake"
    assert (err.response.headers.get("retry-after") == "1") == (code == 429)


def test_anthropic_auth_and_version(fake: FakeUpstream) -> None:
    with anthropic.Anthropic(base_url=fake.anthropic_base_url, api_key="nope", max_retries=0) as bad:
        with pytest.raises(anthropic.AuthenticationError) as e:
            bad.messages.create(model=CLAUDE, max_tokens=10, messages=say("hi"))
        assert e.value.body == {
            "type": "error",
            "error": {"type": "authentication_error", "message": "invalid x-api-key"},
            "request_id": "req_fake",
        }
        bad.close()
        url, body = f"{fake.anthropic_base_url}/v1/messages", {"model": CLAUDE, "max_tokens": 10, "messages": say("hi")}
        ok = plain_http.post(
            url, json=body, headers={"x-api-key": "upstream-secret", "anthropic-version": "2023-06-01"}
        )
        assert ok.status_code == 200
        assert ok.json()["content"][0]["text"] == "Echo: hi"
        no_version = plain_http.post(url, json=body, headers={"x-api-key": "upstream-secret"})
        assert no_version.status_code == 400
        assert no_version.json()["error"]["type"] == "invalid_request_error"
        assert plain_http.post(url, json=body, headers={"anthropic-version": "2023-06-01"}).status_code == 401


def test_anthropic_stream_error_event(claude: anthropic.Anthropic) -> None:
    got: list[str] = []
    with (
        pytest.raises(anthropic.APIStatusError) as e,
        claude.messages.stream(model=CLAUDE, max_tokens=100, messages=say("one two [[stream-error]]")) as s,
    ):
        got.extend(s.text_stream)
    assert got == ["Echo: "]
    assert "overloaded" in str(e.value).lower()
    assert e.value.status_code == 200  # the HTTP status was already 200, so the SDK raises the base class
    assert e.value.body == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def test_anthropic_drop_after(claude: anthropic.Anthropic) -> None:
    got: list[str] = []
    # Mid-stream the SDK lets its transport's (httpx2, not httpx) RemoteProtocolError escape unwrapped.
    with (
        pytest.raises((httpx2.RemoteProtocolError, anthropic.APIConnectionError)),
        claude.messages.stream(model=CLAUDE, max_tokens=100, messages=say("a b c d [[drop-after:2]]")) as s,
    ):
        got.extend(s.text_stream)
    assert got == ["Echo: ", "a "]
    with pytest.raises(anthropic.APIConnectionError):
        claude.messages.create(model=CLAUDE, max_tokens=100, messages=say("x [[drop-after:0]]"))


def test_anthropic_tool_result_must_come_first(claude: anthropic.Anthropic) -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}
    late = [
        *say("x"),
        {"role": "assistant", "content": [use]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "here you go"},
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"},
            ],
        },
    ]
    with pytest.raises(anthropic.BadRequestError) as e:
        claude.messages.create(model=CLAUDE, max_tokens=10, messages=late)  # type: ignore[arg-type]
    assert e.value.type == "invalid_request_error"
    assert e.value.api_message == "tool_use ids were found without tool_result blocks immediately after: toolu_1"
    no_result = [*late[:2], *say("no result")]
    with pytest.raises(anthropic.BadRequestError):  # no result at all
        claude.messages.create(model=CLAUDE, max_tokens=10, messages=no_result)  # type: ignore[arg-type]


GOOD_IMAGE: Any = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}


@pytest.mark.parametrize(
    "patch",
    [
        {"model": None},
        {"max_tokens": None},
        {"max_tokens": 0},
        {"messages": []},
        {"messages": [{"role": "tool", "content": "x"}]},
        {"messages": [{"role": "user", "content": 5}]},
        {"system": [{"type": "image", "text": "x"}]},
        {"system": 7},
        {"temperature": 1.5},
        {"temperature": -0.5},
        {"stop_sequences": ["ok", " "]},
        {"stop_sequences": "STOP"},
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{**GOOD_IMAGE, "source": {"type": "base64", "media_type": "image/bmp", "data": "x"}}],
                }
            ]
        },
        {"messages": [{"role": "user", "content": [{**GOOD_IMAGE, "source": {"type": "file", "file_id": "f"}}]}]},
        {
            "messages": [
                *say("x"),
                {"role": "assistant", "content": [{"type": "tool_use", "id": "bad id!", "name": "f", "input": {}}]},
            ]
        },
        {
            "messages": [
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]}
            ]
        },
        {"tools": [{"name": "f"}]},
        {"tools": [{"input_schema": {"type": "object"}}]},
        {"tool_choice": {"type": "sometimes"}},
        {"thinking": {"type": "enabled", "budget_tokens": 1000}, "max_tokens": 4000},
        {"thinking": {"type": "enabled", "budget_tokens": 2000}, "max_tokens": 2000},
    ],
)
def test_anthropic_validation(fake: FakeUpstream, patch: dict[str, object]) -> None:
    body = {"model": CLAUDE, "max_tokens": 10, "messages": say("hi"), **patch}
    body = {k: v for k, v in body.items() if v is not None}
    r = plain_http.post(
        f"{fake.anthropic_base_url}/v1/messages",
        json=body,
        headers={"x-api-key": "upstream-secret", "anthropic-version": "2023-06-01"},
    )
    assert r.status_code == 400, r.text
    assert r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_anthropic_valid_edge_cases_pass(claude: anthropic.Anthropic) -> None:
    # anthropic 2.x dropped the temperature argument; it still goes over the wire via extra_body.
    kwargs: dict[str, Any] = {
        "thinking": THINKING,
        "tool_choice": {"type": "auto"},
        "tools": [LOOKUP],
        "system": [{"type": "text", "text": "be brief"}],
        "stop_sequences": ["never"],
    }
    m = claude.messages.create(
        model=CLAUDE,
        max_tokens=2048,
        extra_body={"temperature": 1},
        **kwargs,
        messages=[{"role": "user", "content": [{"type": "text", "text": "look"}, GOOD_IMAGE]}],
    )
    assert text_of(m) == "Echo: look"
    assert m.usage.input_tokens == 2 + 1 + 3


def test_anthropic_raw_sse_frames(fake: FakeUpstream) -> None:
    fake.clear()
    body = {
        "model": CLAUDE,
        "max_tokens": 2000,
        "stream": True,
        "messages": say("a b [[think]] [[tool:lookup]]"),
        "tools": [LOOKUP],
        "thinking": THINKING,
    }
    with plain_http.stream(
        "POST",
        f"{fake.anthropic_base_url}/v1/messages?beta=true",
        json=body,
        headers={"x-api-key": "upstream-secret", "anthropic-version": "2023-06-01"},
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/event-stream"
        text = r.read().decode()
    assert fake.requests[0].path == "/v1/messages"
    assert "[DONE]" not in text
    assert text.endswith("\n\n")
    frames = []
    for frame in filter(None, text.split("\n\n")):
        event_line, data_line = frame.split("\n")
        assert event_line.startswith("event: ")
        assert data_line.startswith("data: ")
        frames.append(json.loads(data_line.removeprefix("data: ")))
        assert frames[-1]["type"] == event_line.removeprefix("event: ")
    kinds = [f["type"] for f in frames]
    assert kinds[:3] == ["message_start", "content_block_start", "ping"]
    assert kinds.count("ping") == 1
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    start = frames[0]["message"]
    assert start["content"] == []
    assert start["stop_reason"] is None
    assert start["usage"]["output_tokens"] == 1
    starts = [f["content_block"] for f in frames if f["type"] == "content_block_start"]
    assert starts[0] == {"type": "thinking", "thinking": "", "signature": ""}
    assert starts[1] == {"type": "text", "text": ""}
    assert starts[2]["type"] == "tool_use"
    assert starts[2]["input"] == {}
    deltas = [f["delta"] for f in frames if f["type"] == "content_block_delta"]
    assert [d["type"] for d in deltas].count("signature_delta") == 1
    json_parts = [d["partial_json"] for d in deltas if d["type"] == "input_json_delta"]
    assert json_parts[0] == ""
    assert len(json_parts) == 4
    assert json.loads("".join(json_parts)) == {"echo": "a b"}
    end = frames[-2]
    assert end["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert set(end["usage"]) == {
        "output_tokens",
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    }


def test_anthropic_unknown_route_and_recording(claude: anthropic.Anthropic, fake: FakeUpstream) -> None:
    with pytest.raises(anthropic.RateLimitError):
        claude.messages.create(model=CLAUDE, max_tokens=10, messages=say("[[fail:429]]"))
    r = plain_http.get(f"{fake.anthropic_base_url}/v1/messages/nope")
    assert r.status_code == 404
    assert r.json()["error"]["type"] == "not_found_error"
    assert [(q.method, q.path) for q in fake.requests] == [("POST", "/v1/messages"), ("GET", "/v1/messages/nope")]
    assert fake.requests[0].body["messages"] == say("[[fail:429]]")


# -- faulty base URLs: one deployment fails, whatever the message says ---------------------------


def test_a_status_base_url_answers_that_status_in_each_protocol_s_shape(fake: FakeUpstream) -> None:
    root = fake.anthropic_base_url
    with (
        openai.OpenAI(base_url=f"{root}/status/503/v1", api_key="k", max_retries=0) as broken,
        pytest.raises(openai.InternalServerError) as e,
    ):
        broken.chat.completions.create(model=MODEL, messages=user("hi"))
    assert e.value.status_code == 503
    assert e.value.body["type"] == "server_error"
    with anthropic.Anthropic(base_url=f"{root}/status/529", api_key="k", max_retries=0) as broken_claude:
        with pytest.raises(anthropic.OverloadedError) as overloaded:
            broken_claude.messages.create(model=CLAUDE, max_tokens=10, messages=say("hi"))
        with (
            pytest.raises(anthropic.RateLimitError),
            anthropic.Anthropic(base_url=f"{root}/status/429", api_key="k", max_retries=0) as sdk,
        ):
            sdk.messages.create(model=CLAUDE, max_tokens=10, messages=say("hi"))
    assert overloaded.value.type == "overloaded_error"
    assert [q.path for q in fake.requests][-3:] == [
        "/status/503/v1/chat/completions",
        "/status/529/v1/messages",
        "/status/429/v1/messages",
    ]


def test_a_hang_base_url_never_answers(fake: FakeUpstream) -> None:
    with (
        openai.OpenAI(base_url=f"{fake.anthropic_base_url}/hang/v1", api_key="k", max_retries=0, timeout=0.5) as hung,
        pytest.raises(openai.APITimeoutError),
    ):
        hung.chat.completions.create(model=MODEL, messages=user("hi"))
    assert fake.requests[-1].path == "/hang/v1/chat/completions"


def test_a_cut_base_url_breaks_off_a_200(fake: FakeUpstream) -> None:
    with plain_http.stream(
        "POST", f"{fake.anthropic_base_url}/cut/v1/chat/completions", json={"model": MODEL}
    ) as response:
        assert response.status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):
            response.read()


def test_each_request_records_how_it_ended(client: openai.OpenAI, fake: FakeUpstream) -> None:
    import time

    client.chat.completions.create(model=MODEL, messages=user("hi"))
    finished = fake.requests[-1]
    assert finished.completed
    assert not finished.aborted
    assert not finished.dropped

    with pytest.raises(openai.APIError):
        list(client.chat.completions.create(model=MODEL, messages=user("a b c [[drop-after:1]]"), stream=True))
    dropped = fake.requests[-1]
    assert dropped.dropped
    assert not dropped.completed
    assert not dropped.aborted

    stream = client.chat.completions.create(model=MODEL, messages=user("a b c d e f [[chunk-delay:300]]"), stream=True)
    next(iter(stream))
    stream.close()  # the caller hangs up mid-stream
    hung_up = fake.requests[-1]
    deadline = time.monotonic() + 5
    while not hung_up.aborted and time.monotonic() < deadline:
        time.sleep(0.02)
    assert hung_up.aborted
    assert not hung_up.completed


def test_stream_error_sends_openai_s_in_stream_error_after_one_delta(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(model=MODEL, messages=user("a b c [[stream-error]]"), stream=True)
    received: list[str] = []
    with pytest.raises(openai.APIError) as error:
        received.extend(c.delta.content for chunk in stream for c in chunk.choices if c.delta.content)
    assert received == ["Echo: "]
    assert "server had an error" in error.value.message


def test_anthropic_no_usage(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(
        model="claude-x", max_tokens=50, messages=[{"role": "user", "content": "hi [[no-usage]]"}]
    )
    assert message.content[0].text == "Echo: hi"
    assert message.usage is None
    events = list(
        claude.messages.create(
            model="claude-x", max_tokens=50, stream=True, messages=[{"role": "user", "content": "hi [[no-usage]]"}]
        )
    )
    start = next(e for e in events if e.type == "message_start")
    delta = next(e for e in events if e.type == "message_delta")
    assert start.message.usage is None
    assert delta.usage is None


def test_run_on_its_own_it_answers_every_protocol_s_failure_directive() -> None:
    """``python -m tests.support.fake_upstream`` runs this file as ``__main__``, while the Anthropic and
    Responses fakes import it as ``tests.support.fake_upstream``: a failure one of them raises must still be
    answered in its protocol's shape, not crash the server into a bare 500."""
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = start_server(
        [sys.executable, "-m", "tests.support.fake_upstream", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                plain_http.get(root + "/v1/models", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the fake upstream did not start"
                time.sleep(0.1)
        auth = {
            "authorization": "Bearer upstream-secret",
            "x-api-key": "upstream-secret",
            "anthropic-version": "2023-06-01",
        }
        chat = plain_http.post(
            root + "/v1/chat/completions", headers=auth, json={"model": MODEL, "messages": user("hi [[fail:503]]")}
        )
        responses = plain_http.post(
            root + "/v1/responses", headers=auth, json={"model": MODEL, "input": "hi [[fail:503]]"}
        )
        messages = plain_http.post(
            root + "/v1/messages",
            headers=auth,
            json={"model": CLAUDE, "max_tokens": 10, "messages": say("hi [[fail:503]]")},
        )
    finally:
        end_server(server, timeout=10)
    assert (chat.status_code, chat.json()["error"]["type"]) == (503, "server_error")
    assert (responses.status_code, responses.json()["error"]["type"]) == (503, "server_error")
    assert (messages.status_code, messages.json()["error"]["type"]) == (503, "overloaded_error")
