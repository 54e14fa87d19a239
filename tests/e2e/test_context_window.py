"""Prompts over a model's context window are refused before the upstream is called, on every endpoint.

The gateway's count is reproduced here with the same rules (app/tokens), so each test can build a
prompt exactly at the window and one just over it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import ExitStack
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from app.tokens import prompt_tokens
from app.tokens.counting import RULES
from tests.support import images, plain_http
from tests.support.charges import balance_of
from tests.support.fake_anthropic import prompt_tokens as fake_anthropic_prompt_tokens
from tests.support.fake_upstream import FakeUpstream, chat_prompt_tokens
from tests.support.gateway import Gateway

WINDOWS = {"fake-gpt": 8192, "small-claude": 2048}
RULES_OF = {"fake-gpt": RULES["o200k"], "small-claude": RULES["anthropic"]}

Body = Callable[[str, str], dict[str, Any]]
BODIES: dict[str, Body] = {
    "chat": lambda model, text: {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 5},
    "responses": lambda model, text: {"model": model, "input": text, "max_output_tokens": 16},
    "messages": lambda model, text: {"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": text}]},
}
PARAMS = {"chat": "messages", "responses": "input", "messages": "messages"}


def at_the_window(endpoint: str, model: str) -> tuple[dict[str, Any], int, dict[str, Any], int]:
    """The largest prompt (of repeated words) the gateway's count lets through, and the next one."""
    build, rules, window = BODIES[endpoint], RULES_OF[model], WINDOWS[model]

    def count(words: int) -> int:
        return prompt_tokens(build(model, "go" + " on" * words), endpoint, rules)

    low, high = 0, window  # count(low) <= window < count(high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if count(mid) <= window else (low, mid)
    return build(model, "go" + " on" * low), count(low), build(model, "go" + " on" * high), count(high)


def send(gateway: Gateway, key: str, endpoint: str, body: dict[str, Any]) -> Any:
    """Through the endpoint's official SDK."""
    if endpoint == "messages":
        with anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=key, max_retries=0) as claude:
            return claude.messages.create(**body)
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as client:
        if endpoint == "chat":
            return client.chat.completions.create(**body)
        return client.responses.create(**body)


def no_open_hold(gateway: Gateway, team_name: str) -> bool:
    return "held 0," in gateway.cli("team", "show", team_name).stdout


@pytest.mark.parametrize(
    ("endpoint", "model"),
    [
        ("chat", "fake-gpt"),  # passed through
        ("responses", "fake-gpt"),  # translated to chat
        ("messages", "fake-gpt"),  # translated to chat
        ("messages", "small-claude"),  # passed through, the Anthropic estimate
        ("chat", "small-claude"),  # translated to messages
        ("responses", "small-claude"),
    ],
)
def test_a_prompt_over_the_window_is_a_400_and_one_at_it_is_served(
    endpoint, model, gateway: Gateway, team, fake_upstream: FakeUpstream
):
    fits, fits_count, too_long, too_long_count = at_the_window(endpoint, model)
    window = WINDOWS[model]
    assert window - 2 <= fits_count <= window < too_long_count <= window + 2

    error_class = anthropic.BadRequestError if endpoint == "messages" else openai.BadRequestError
    with pytest.raises(error_class) as raised:
        send(gateway, team.key, endpoint, too_long)
    refused = raised.value
    assert isinstance(refused, anthropic.BadRequestError | openai.BadRequestError)  # either SDK's, as typed
    assert refused.status_code == 400
    assert refused.response.headers["x-should-retry"] == "false"
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages resulted in "
        f"{too_long_count} tokens. Please reduce the length of the messages."
    )
    if endpoint == "messages":
        assert refused.response.json() == {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": message},
        }
    else:
        assert refused.response.json() == {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": PARAMS[endpoint],
                "code": "context_length_exceeded",
            }
        }
    assert fake_upstream.requests == []  # the upstream was never called
    assert balance_of(gateway, team.name) == 100
    assert no_open_hold(gateway, team.name)

    send(gateway, team.key, endpoint, fits)
    assert len(fake_upstream.requests) == 1
    assert balance_of(gateway, team.name) < 100


def test_the_demo_model_s_window_is_enforced_too(gateway: Gateway, team):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(
                model="demo-gpt", messages=[{"role": "user", "content": "go" + " on" * 5000}]
            )
        assert "maximum context length is 4096 tokens" in refused.value.message


def test_count_tokens_answers_the_gateway_s_count(gateway: Gateway, team, fake_upstream: FakeUpstream):
    with anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0) as claude:
        tools = [{"name": "lookup", "description": "Look it up", "input_schema": {"type": "object"}}]
        body = {"system": "be brief", "tools": tools, "messages": [{"role": "user", "content": "hello there 世界 🎉"}]}
        for model, rules in (
            ("fake-claude", RULES["anthropic"]),
            ("fake-gpt", RULES["o200k"]),
            ("demo-gpt", RULES["o200k"]),
        ):
            counted = claude.messages.count_tokens(model=model, **body)
            assert counted.input_tokens == prompt_tokens(body, "messages", rules)
        assert fake_upstream.requests == []  # counted by the gateway, not asked of the upstream
        too_long = claude.messages.count_tokens(
            model="small-claude", messages=[{"role": "user", "content": "on " * 3000}]
        )
        assert too_long.input_tokens > WINDOWS["small-claude"]  # counting is not refused, only sending


# -- the gateway's count against the upstream's ---------------------------------------------------

CORPUS = [
    "The quick brown fox jumps over the lazy dog, again and again, until the dog finally wakes up.",
    "def fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(10)])",
    "人工智能正在改变世界。我们需要准确地计算令牌。東京都は日本の首都です。안녕하세요, 세계!",
    "🎉🚀👩‍👩‍👧‍👦 emoji 🇫🇷 and ✨ sparkles ✨ everywhere 🎈🎈🎈",
    "Les élèves ont réussi l'examen « très difficile » à Noël — Привет, мир! مرحبا بالعالم",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z 1 2 3 4 5 6 7 8 9 0 ! @ # $ % ^ & * ( )",
]
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a word up",
            "parameters": {"type": "object", "properties": {"word": {"type": "string", "description": "the word"}}},
        },
    }
]


def test_the_gateway_never_counts_fewer_prompt_tokens_than_the_upstream(
    gateway: Gateway, team, fake_upstream: FakeUpstream
):
    with (
        openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client,
        anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0) as claude,
    ):
        picture = images.data_url(images.png(640, 480), "image/png")
        for text in CORPUS:
            # chat → OpenAI-compatible (with tools, and with an image): an upstream that reports no usage is
            # billed the gateway's count, which must be at least what the upstream counts for that request.
            for extra in ({}, {"tools": CHAT_TOOLS}):
                fake_upstream.clear()
                messages = [
                    {"role": "system", "content": "be brief"},
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": text + " [[no-usage]]"},
                            {"type": "image_url", "image_url": {"url": picture}},
                        ],
                    },
                ]
                ours = client.chat.completions.create(
                    model="vision-gpt", messages=messages, **extra
                ).usage.prompt_tokens
                assert ours >= chat_prompt_tokens(fake_upstream.requests[0].body["messages"]) > 3

            # responses → OpenAI-compatible (translated)
            fake_upstream.clear()
            reply = client.responses.create(model="fake-gpt", instructions="be brief", input=text + " [[no-usage]]")
            assert reply.usage.input_tokens >= chat_prompt_tokens(fake_upstream.requests[0].body["messages"])

            # messages → Anthropic (passed through): the gateway's count against the upstream's reported one
            body = {
                "system": "be brief",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": text},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": picture.split(",", 1)[1],
                                },
                            },
                        ],
                    }
                ],
            }
            ours = claude.messages.count_tokens(model="fake-claude", **body).input_tokens
            theirs = claude.messages.create(model="fake-claude", max_tokens=5, **body).usage.input_tokens
            assert ours >= theirs == fake_anthropic_prompt_tokens({**body, "model": "claude-x"})


def test_a_prompt_of_megabytes_is_counted_and_refused_in_seconds(gateway: Gateway, team):
    big = "lorem ipsum dolor sit amet " * 150_000  # 4 MB, ~750k tokens: over every window here
    started = time.monotonic()
    with plain_http.Client(timeout=30) as http:
        refused = http.post(
            gateway.base_url + "/chat/completions",
            headers={"Authorization": f"Bearer {team.key}"},
            json={"model": "fake-gpt", "messages": [{"role": "user", "content": big}]},
        )
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "context_length_exceeded"
    assert time.monotonic() - started < 10
    assert balance_of(gateway, team.name) == Decimal(100)


#: (client wire, model, the field the client sets, the field the upstream gets): passed through to an
#: upstream of the client's protocol, or translated for another.
CLAMPED = [
    ("chat", "clamping-gpt", "max_tokens", "max_tokens"),
    ("chat", "clamping-gpt", "max_completion_tokens", "max_completion_tokens"),
    ("responses", "clamping-codex", "max_output_tokens", "max_output_tokens"),
    ("messages", "clamping-claude", "max_tokens", "max_tokens"),
    ("messages", "clamping-gpt", "max_tokens", "max_completion_tokens"),  # translated
    ("chat", "clamping-claude", "max_tokens", "max_tokens"),  # translated
]


def raw_send(gateway: Gateway, key: str, endpoint: str, body: dict[str, Any]) -> Any:
    """Through the endpoint's official SDK, for the answer's headers; a stream is read to its end."""
    with ExitStack() as closing:  # the client stays open until a stream is read
        if endpoint == "messages":
            claude = closing.enter_context(anthropic.Anthropic(base_url=gateway.root_url, api_key=key, max_retries=0))
            # a timeout of its own: without one the SDK refuses a plain request for 128,000 tokens
            raw: Any = claude.messages.with_raw_response.create(**body, timeout=60)
        else:
            client = closing.enter_context(openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0))
            create = (client.chat.completions if endpoint == "chat" else client.responses).with_raw_response.create
            raw = create(**body)
        answer = raw.parse()
        if body.get("stream"):
            list(answer)
    return raw


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize(
    ("endpoint", "model", "field", "sent_as"), CLAMPED, ids=[f"{e}-{m}-{f}" for e, m, f, _ in CLAMPED]
)
def test_a_model_that_clamps_serves_an_output_limit_above_its_own_with_its_own(
    gateway: Gateway,
    team,
    fake_upstream: FakeUpstream,
    endpoint: str,
    model: str,
    field: str,
    sent_as: str,
    stream: bool,
):
    """``clamp_output_to_model``: LiteLLM asks 128,000 output tokens of a model it does not know; the
    model's own 1,024 go upstream, and the answer says so as the balance clamp does."""
    body = {**BODIES[endpoint](model, "hi"), field: 128_000, **({"stream": True} if stream else {})}
    raw = raw_send(gateway, team.key, endpoint, body)
    assert raw.headers["x-tollgate-output-clamped"] == "1024"
    assert fake_upstream.requests[-1].body[sent_as] == 1024
    within = raw_send(gateway, team.key, endpoint, {**body, field: 1024})
    assert "x-tollgate-output-clamped" not in within.headers
    assert fake_upstream.requests[-1].body[sent_as] == 1024


@pytest.mark.parametrize("endpoint", list(BODIES))
def test_without_the_opt_in_an_output_limit_above_the_model_s_is_a_400(gateway: Gateway, team, endpoint: str):
    model = {"chat": "fake-gpt", "responses": "fake-codex", "messages": "small-claude"}[endpoint]
    field = "max_output_tokens" if endpoint == "responses" else "max_tokens"
    error = anthropic.BadRequestError if endpoint == "messages" else openai.BadRequestError
    timeout = {"timeout": 60} if endpoint == "messages" else {}  # the SDK's own check, as above
    with pytest.raises(error) as refused:
        send(gateway, team.key, endpoint, {**BODIES[endpoint](model, "hi"), field: 128_000, **timeout})
    assert isinstance(refused.value, anthropic.BadRequestError | openai.BadRequestError)  # either SDK's, as typed
    assert "produces at most" in str(refused.value.message)
    assert no_open_hold(gateway, team.name)


LITELLM = Path(__file__).resolve().parent.parent / "fixtures" / "litellm" / "messages-unknown-model.json"


@pytest.mark.parametrize(
    ("model", "served"), [("clamping-claude", True), ("clamping-gpt", True), ("small-claude", False)]
)
def test_litellm_s_request_for_a_model_it_does_not_know(
    gateway: Gateway, team, fake_upstream: FakeUpstream, model: str, served: bool
):
    """The request LiteLLM 1.110.2 really sent (``tests/fixtures/litellm``) for a model it has no
    limits for: ``max_tokens`` 128,000. A model that clamps serves it, passed through or translated;
    one that does not refuses it, as the providers do."""
    record = json.loads(LITELLM.read_text())
    assert record["body"]["max_tokens"] == 128_000
    answer = plain_http.post(
        gateway.root_url + record["path"],
        json={**record["body"], "model": model},
        timeout=30,
        headers={**record["headers"], "x-api-key": team.key},
    )
    if not served:
        assert answer.status_code == 400
        assert answer.json()["error"]["type"] == "invalid_request_error"
        return
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-tollgate-output-clamped"] == "1024"
    assert answer.json()["content"][0]["text"] == "Echo: Say hi."
    sent = fake_upstream.requests[-1].body
    assert sent.get("max_tokens", sent.get("max_completion_tokens")) == 1024
