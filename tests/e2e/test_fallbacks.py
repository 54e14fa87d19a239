"""Failover across a model's deployments, through real sockets and the official SDKs.

The models (tests/support/gateway.py) put a broken deployment first — weighted so that it is the first one
tried in all but one request in a million — and a working one second: a closed port (refused),
``/status/503`` or ``/status/529`` (an error status), ``/hang`` (never answers; its read timeout is
1 s). Each deployment knows the model by its own name (``gpt-a``/``gpt-b``, ``claude-a``/``claude-b``),
so the fake upstream's records say which deployment was called, in which order. After every test the
ledger must verify and the team must have paid exactly for the answers it received, each once.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import anthropic
import openai
import pytest

from app.tokens.counting import RULES
from app.upstream.fallback import weighted_order
from tests.support.charges import balance_of
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Team, Teams

PROMPT = "hello there gateway"
#: What a client is told when an answer breaks off after its 200.
BROKE_OFF = "The upstream provider broke off its answer: the connection closed before the answer was complete."


@dataclass(frozen=True)
class Answer:
    text: str
    request_id: str
    cost: Decimal | None  # the charge the client was told, if it was told one


def _credits(usage_extra: dict) -> Decimal:
    return Decimal(str(usage_extra["cost"]["credits"]))


def ask(gateway: Gateway, team: Team, endpoint: str, model: str, text: str = PROMPT, stream: bool = False) -> Answer:
    """One request on ``endpoint`` with that endpoint's official SDK; what the client got."""
    with (
        openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client,
        anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0) as claude,
    ):
        messages = [{"role": "user", "content": text}]
        if endpoint == "chat" and not stream:
            raw = client.chat.completions.with_raw_response.create(model=model, messages=messages)
            completion = raw.parse()
            return Answer(
                completion.choices[0].message.content or "",
                raw.headers["x-request-id"],
                _credits(completion.usage.model_extra),
            )
        if endpoint == "chat":
            chunks = client.chat.completions.create(
                model=model, messages=messages, stream=True, stream_options={"include_usage": True}
            )
            received = list(chunks)
            return Answer(
                "".join(c.choices[0].delta.content or "" for c in received if c.choices),
                chunks.response.headers["x-request-id"],
                _credits(received[-1].usage.model_extra),
            )
        if endpoint == "messages" and not stream:
            raw_message = claude.messages.with_raw_response.create(model=model, max_tokens=100, messages=messages)
            message = raw_message.parse()
            return Answer(
                message.content[0].text, raw_message.headers["x-request-id"], _credits(message.usage.model_extra)
            )
        if endpoint == "messages":
            events = claude.messages.create(model=model, max_tokens=100, messages=messages, stream=True)
            seen = list(events)
            (delta,) = [e for e in seen if e.type == "message_delta"]
            return Answer(
                "".join(e.delta.text for e in seen if e.type == "content_block_delta"),
                events.response.headers["x-request-id"],
                _credits(delta.usage.model_extra),
            )
        if not stream:
            raw_response = client.responses.with_raw_response.create(model=model, input=text)
            response = raw_response.parse()
            return Answer(
                response.output_text, raw_response.headers["x-request-id"], _credits(response.usage.model_extra)
            )
        events = client.responses.create(model=model, input=text, stream=True)
        completed = next(e for e in events if e.type == "response.completed").response
        return Answer(
            completed.output_text, events.response.headers["x-request-id"], _credits(completed.usage.model_extra)
        )


def sent(fake: FakeUpstream) -> list[tuple[str, str]]:
    """(path, model name) of every request the upstreams received, in order."""
    return [(r.path, r.body["model"]) for r in fake.requests]


def charges(gateway: Gateway, team: Team) -> list[dict]:
    rows = [
        json.loads(line)
        for line in gateway.cli("ledger", "export", "--team", team.name, "--format", "jsonl").stdout.splitlines()
    ]
    return [row for row in rows if row["kind"] == "charge"]


def audit(gateway: Gateway, team: Team, answers: list[Answer]) -> list[dict]:
    """``tollgate ledger verify`` is clean; each answer was charged once, what its client was told, and
    nothing else was; the balance is what is left of 100 credits after those charges."""
    gateway.cli("ledger", "verify")
    rows = charges(gateway, team)
    assert sorted(row["request_id"] for row in rows) == sorted(a.request_id for a in answers)
    by_request = {row["request_id"]: row for row in rows}
    for answer in answers:
        if answer.cost is not None:
            assert Decimal(-by_request[answer.request_id]["amount"]) / 1_000_000 == answer.cost
    assert balance_of(gateway, team.name) == 100 - Decimal(-sum(row["amount"] for row in rows)) / 1_000_000
    return rows


# -- a deployment that fails before answering hands the request to the next ----------------------

BROKEN_FIRST = {
    "refused-gpt": [],  # a closed port: the fake never hears of the first attempt
    "overloaded-gpt": [("/status/503/v1/chat/completions", "gpt-a")],
    "overloaded-claude": [("/status/529/v1/messages", "claude-a")],
}
ANSWERED_BY = {
    "refused-gpt": ("/v1/chat/completions", "gpt-b"),
    "overloaded-gpt": ("/v1/chat/completions", "gpt-b"),
    "hung-gpt": ("/v1/chat/completions", "gpt-b"),
    "overloaded-claude": ("/v1/messages", "claude-b"),
}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("endpoint", ["chat", "messages"])
@pytest.mark.parametrize("model", list(BROKEN_FIRST))
def test_a_deployment_that_fails_before_answering_hands_over_to_the_next(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream, model: str, endpoint: str, stream: bool
):
    answer = ask(gateway, team, endpoint, model, stream=stream)
    assert answer.text == f"Echo: {PROMPT}"
    assert sent(fake_upstream) == [*BROKEN_FIRST[model], ANSWERED_BY[model]]
    audit(gateway, team, [answer])


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_the_responses_endpoint_fails_over_too(gateway: Gateway, team: Team, fake_upstream: FakeUpstream, stream: bool):
    answer = ask(gateway, team, "responses", "overloaded-gpt", stream=stream)
    assert answer.text == f"Echo: {PROMPT}"
    assert sent(fake_upstream) == [("/status/503/v1/chat/completions", "gpt-a"), ("/v1/chat/completions", "gpt-b")]
    audit(gateway, team, [answer])


@pytest.mark.parametrize(("endpoint", "stream"), [("chat", False), ("chat", True), ("messages", True)])
def test_a_deployment_that_never_answers_is_given_up_after_its_timeout(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream, endpoint: str, stream: bool
):
    answer = ask(gateway, team, endpoint, "hung-gpt", stream=stream)  # the hung deployment's timeout is 1 s
    assert answer.text == f"Echo: {PROMPT}"
    assert sent(fake_upstream) == [("/hang/v1/chat/completions", "gpt-a"), ("/v1/chat/completions", "gpt-b")]
    audit(gateway, team, [answer])


# -- when every deployment fails, the client gets the last one's error and pays nothing -----------


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_when_every_deployment_fails_the_client_gets_the_last_error_and_pays_nothing(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream, stream: bool
):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        with pytest.raises(openai.InternalServerError) as error:  # passed through: the upstream's own 500
            client.chat.completions.create(
                model="twin-gpt", messages=[{"role": "user", "content": "x [[fail:500]]"}], stream=stream
            )
        assert error.value.status_code == 500
        assert error.value.response.headers["x-should-retry"] == "true"
        assert error.value.body == {
            "message": "fake upstream failure 500",
            "type": "server_error",
            "param": None,
            "code": None,
        }
        with anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0) as claude:
            with pytest.raises(anthropic.InternalServerError) as translated:  # translated: Tollgate's 502, in its shape
                claude.messages.create(
                    model="twin-gpt", max_tokens=10, messages=[{"role": "user", "content": "x [[fail:500]]"}]
                )
            assert translated.value.status_code == 502
            assert "status 500" in translated.value.message
            assert sorted(model for _, model in sent(fake_upstream)) == ["gpt-a", "gpt-a", "gpt-b", "gpt-b"]
            audit(gateway, team, [])


def test_when_every_deployment_times_out_the_client_gets_a_504(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream
):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        with pytest.raises(openai.InternalServerError) as error:  # twin-gpt's deployments wait 2 s each
            client.chat.completions.create(
                model="twin-gpt", messages=[{"role": "user", "content": "x [[latency:4500]]"}]
            )
        assert error.value.status_code == 504
        assert sorted(model for _, model in sent(fake_upstream)) == ["gpt-a", "gpt-b"]
        audit(gateway, team, [])


def test_a_rate_limit_is_tried_elsewhere_and_the_last_one_reaches_the_client(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream
):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        with pytest.raises(openai.RateLimitError) as error:
            client.chat.completions.create(model="twin-gpt", messages=[{"role": "user", "content": "x [[fail:429]]"}])
        assert error.value.response.headers["retry-after"] == "1"
        assert len(fake_upstream.requests) == 2
        audit(gateway, team, [])


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_messages_clients_get_their_own_error_when_every_deployment_is_overloaded(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream, stream: bool
):
    with anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0) as claude:
        with pytest.raises(anthropic.OverloadedError) as error:  # Anthropic's own 529, as it wrote it
            claude.messages.create(
                model="twin-claude",
                max_tokens=100,
                stream=stream,
                messages=[{"role": "user", "content": "x [[fail:529]]"}],
            )
        assert error.value.status_code == 529
        assert error.value.body["error"]["type"] == "overloaded_error"
        assert error.value.response.headers["x-should-retry"] == "true"
        assert sorted(model for _, model in sent(fake_upstream)) == ["claude-a", "claude-b"]
        audit(gateway, team, [])


# -- what is never tried elsewhere ------------------------------------------------------------------


def test_a_refused_request_is_not_tried_elsewhere(gateway: Gateway, team: Team, fake_upstream: FakeUpstream):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="twin-gpt", messages=[{"role": "user", "content": "x [[fail:400]]"}])
        assert len(fake_upstream.requests) == 1
        audit(gateway, team, [])


def test_max_attempts_bounds_the_deployments_tried(gateway: Gateway, team: Team, fake_upstream: FakeUpstream):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        with pytest.raises(
            openai.InternalServerError
        ) as error:  # once-gpt: max_attempts = 1, its first deployment 503s
            client.chat.completions.create(model="once-gpt", messages=[{"role": "user", "content": PROMPT}])
        assert error.value.status_code == 503
        assert sent(fake_upstream) == [("/status/503/v1/chat/completions", "gpt-a")]
        audit(gateway, team, [])


def test_an_answer_that_breaks_off_after_its_200_is_not_retried(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream
):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        with pytest.raises(openai.InternalServerError) as error:  # cut-gpt's first deployment: a 200, cut short
            client.chat.completions.create(model="cut-gpt", messages=[{"role": "user", "content": PROMPT}])
        assert error.value.status_code == 502
        assert error.value.body["message"] == BROKE_OFF  # type: ignore[index]
        with pytest.raises(openai.APIError) as broken:  # a stream: open when the 200 came, so the error comes in-stream
            list(
                client.chat.completions.create(
                    model="cut-gpt", messages=[{"role": "user", "content": PROMPT}], stream=True
                )
            )
        assert broken.value.message == BROKE_OFF
        assert sent(fake_upstream) == [("/cut/v1/chat/completions", "gpt-a")] * 2
        audit(gateway, team, [])


def test_a_chat_stream_that_breaks_after_it_opened_is_not_retried(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream
):
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        chunks = client.chat.completions.create(
            model="twin-gpt", stream=True, messages=[{"role": "user", "content": "one two three [[drop-after:2]]"}]
        )
        received: list[str] = []
        with pytest.raises(openai.APIError) as error:
            received.extend(
                chunk.choices[0].delta.content or "" for chunk in chunks
            )  # keeps what came before the break
        assert error.value.message == BROKE_OFF
        assert "".join(received) == "Echo: one "
        assert len(fake_upstream.requests) == 1
        (charge,) = audit(gateway, team, [Answer("", chunks.response.headers["x-request-id"], None)])
        assert charge["output_tokens"] == RULES["o200k"].text("Echo: one ")  # the delivered text's tokens


def test_a_messages_stream_that_breaks_after_it_opened_is_not_retried(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream
):
    with anthropic.Anthropic(base_url=gateway.base_url.removesuffix("/v1"), api_key=team.key, max_retries=0) as claude:
        events = claude.messages.create(
            model="twin-claude",
            max_tokens=100,
            stream=True,
            messages=[{"role": "user", "content": "one two three [[stream-error]]"}],
        )
        received: list[str] = []
        with pytest.raises(anthropic.APIStatusError) as error:
            received.extend(event.delta.text for event in events if event.type == "content_block_delta")
        assert "overloaded" in str(error.value).lower()
        assert "".join(received) == "Echo: "
        assert len(fake_upstream.requests) == 1
        (charge,) = audit(gateway, team, [Answer("", events.response.headers["x-request-id"], None)])
        assert charge["output_tokens"] == RULES["anthropic"].text("Echo: ")  # the delivered text's (estimated) tokens


# -- weights ---------------------------------------------------------------------------------------


def test_the_first_attempt_lands_on_each_deployment_in_proportion_to_its_weight(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream
):
    answers = [ask(gateway, team, "chat", "twin-gpt", text=f"request {i}") for i in range(100)]
    picked = Counter(model for _, model in sent(fake_upstream))
    assert sum(picked.values()) == 100  # no failover: each request went to one deployment
    # twin-gpt weighs gpt-a 3 and gpt-b 1: 75 ± 4.3 expected; these bounds are 4.6σ below and 4.2σ above.
    assert 55 <= picked["gpt-a"] <= 93, picked
    audit(gateway, team, answers)


def test_the_failover_order_follows_the_weights():
    rng = random.Random(5)
    orders = Counter(tuple(weighted_order([6, 3, 1], rng)) for _ in range(20_000))
    firsts = Counter()
    for order, n in orders.items():
        assert sorted(order) == [0, 1, 2]  # every deployment once
        firsts[order[0]] += n
    assert [firsts[i] / 20_000 for i in range(3)] == pytest.approx([0.6, 0.3, 0.1], abs=0.015)
    # after the first, the rest by weight among those left: 0 first, then 1 before 2 three times in four
    assert orders[(0, 1, 2)] / firsts[0] == pytest.approx(0.75, abs=0.015)


def test_each_failover_is_logged_with_the_model_the_deployment_and_the_reason(
    tmp_path: Path, fake_upstream: FakeUpstream
):
    gateway = Gateway(write_config(tmp_path, fake_upstream.base_url)).start()
    teams = Teams(gateway.config)
    try:
        team = teams.open("100")
        answer = ask(gateway, team, "chat", "overloaded-gpt")
        audit(gateway, team, [answer])
    finally:
        teams.close()
        output = gateway.stop()
    (line,) = [line for line in output.splitlines() if "failed before answering" in line]
    assert "model overloaded-gpt: deployment 0 failed before answering (503: " in line
    assert "trying deployment 1" in line
