"""An answer passed through (chat → a chat upstream, messages → an Anthropic upstream) reaches the
client as the upstream wrote it. A stream's events go out as the upstream's bytes, whatever the
reads that cut them: only the model's name changes, and the final frames report the charge; one that
ends early is billed for what was sent, and an upstream's usage is billed wherever in the stream it
came. A whole answer keeps every member, in its place, with the client's model and the cost; one
that is not an answer is the upstream's failure, and costs nothing.

The upstream here is a wire, not a provider (``tests/support/canned_upstream.py``): each test writes
the exact bytes it sends and decides how they are cut into reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.json import encode
from app.tokens import prompt_tokens, rules_for
from domain.pricing import cost_in_micros
from domain.usage import TokenUsage
from tests.support.canned_upstream import CannedUpstream
from tests.support.gateway import GATEWAY_ENV, write_config
from tests.support.in_process import InProcessGateway, charge_of, in_credits, ledger_of

WORDS = ["Hello", " from", " the", " wire", ",", " word", " by", " word", "."]
USAGE = {"prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18}
CHAT = {
    "model": "fake-gpt",
    "messages": [{"role": "user", "content": "say it"}],
    "stream": True,
    "stream_options": {"include_usage": True},
}


@pytest.fixture(scope="module")
def canned() -> Iterator[CannedUpstream]:
    with CannedUpstream() as upstream:
        yield upstream


@pytest.fixture
def gateway(tmp_path: Path, canned: CannedUpstream) -> Iterator[InProcessGateway]:
    with pytest.MonkeyPatch.context() as env:
        for name, value in GATEWAY_ENV.items():
            env.setenv(name, value)
        running = InProcessGateway(write_config(tmp_path, canned.base_url))
        yield running
        running.stop()


def chunk(delta: dict[str, Any] | None, *, finish: str | None = None, usage: Any = None) -> bytes:
    """A chunk as OpenAI writes one (``usage`` null on each when usage was asked for)."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    return json.dumps(
        {
            "id": "chatcmpl-7",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "gpt-x",
            "system_fingerprint": "fp_7",
            "choices": choices,
            "usage": usage,
        },
        separators=(",", ":"),
    ).encode()


CONTENT = [
    chunk({"role": "assistant", "content": ""}),
    *(chunk({"content": w}) for w in WORDS),
    chunk({}, finish="stop"),
]


def sse(datas: list[bytes], line_end: bytes = b"\n") -> bytes:
    return b"".join(b"data: " + d + line_end * 2 for d in datas)


def cost_of(gateway: InProcessGateway, usage: TokenUsage, model: str = "fake-gpt") -> int:
    found = gateway.settings.model(model)
    assert found is not None
    return cost_in_micros(usage, found.price, gateway.settings.credits_per_usd)


def as_client_model(datas: list[bytes]) -> bytes:
    return sse([d.replace(b'"model":"gpt-x"', b'"model":"fake-gpt"') for d in datas])


STREAM = sse([*CONTENT, chunk(None, usage=USAGE), b"[DONE]"])
READS = {
    "one read": ([STREAM], 0.0),
    "a read per event": ([sse([d]) for d in [*CONTENT, chunk(None, usage=USAGE), b"[DONE]"]], 0.005),
    "events cut at every 7th byte": ([STREAM[i : i + 7] for i in range(0, len(STREAM), 7)], 0.0005),
    "lines ended by \\r\\n": ([sse([*CONTENT, chunk(None, usage=USAGE), b"[DONE]"], b"\r\n")], 0.0),
}


@pytest.mark.parametrize("reads", list(READS))
def test_a_chat_stream_reaches_the_client_as_the_upstream_sent_it_with_the_cost_at_the_end(
    gateway: InProcessGateway, canned: CannedUpstream, reads: str
) -> None:
    pieces, pause = READS[reads]
    canned.answer(pieces, pause=pause)
    team = gateway.open_team("acme")
    answer = gateway.post(team, "/v1/chat/completions", CHAT)
    assert answer.status_code == 200, answer.text
    body = answer.content
    expected = as_client_model(CONTENT)
    assert body.startswith(expected)
    final, done = body[len(expected) :].split(b"\n\n", 2)[:2]
    assert done == b"data: [DONE]"
    charged = charge_of(gateway.runtime.store, "acme", answer.headers["x-request-id"]).charged
    assert charged == cost_of(gateway, TokenUsage(input_tokens=9, output_tokens=9))
    reported = json.loads(final.removeprefix(b"data: "), parse_float=Decimal)
    assert reported["usage"]["cost"]["credits"] == in_credits(charged)
    # The final chunk as it has always been built: the last chunk's id, created and fingerprint,
    # the upstream's usage with the cost and the balance after it.
    assert final == b"data: " + encode(
        {
            "id": "chatcmpl-7",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "fake-gpt",
            "choices": [],
            "usage": {**USAGE, **{k: reported["usage"][k] for k in ("cost", "remaining")}},
            "system_fingerprint": "fp_7",
        }
    )
    assert json.loads(canned.requests[-1])["stream_options"] == {"include_usage": True}


def test_a_client_that_did_not_ask_for_usage_gets_the_chunks_without_it(
    gateway: InProcessGateway, canned: CannedUpstream
) -> None:
    canned.answer([STREAM])
    team = gateway.open_team("acme")
    answer = gateway.post(team, "/v1/chat/completions", {**CHAT, "stream_options": None})
    assert answer.status_code == 200, answer.text
    expected = as_client_model([d.replace(b',"usage":null', b"") for d in CONTENT]) + b"data: [DONE]\n\n"
    assert answer.content == expected


def test_a_client_that_hangs_up_is_billed_for_the_chunks_of_the_reads_it_was_sent(
    gateway: InProcessGateway, canned: CannedUpstream
) -> None:
    """Four chunks come in one read and go out in one write; the client leaves while the upstream
    is still generating the rest."""
    canned.answer([sse(CONTENT[:5]), sse([*CONTENT[5:], chunk(None, usage=USAGE), b"[DONE]"])], pause=1.0)
    team = gateway.open_team("acme")
    sent = gateway.hang_up(team, "/v1/chat/completions", CHAT, after_frames=1)
    assert sent.status == 200
    assert b"".join(sent.frames) == as_client_model(CONTENT[:5])
    received = "".join(WORDS[:4])
    rules = rules_for(None, "chat")
    usage = TokenUsage(input_tokens=prompt_tokens(CHAT, "chat", rules), output_tokens=rules.text(received))
    with ledger_of(gateway) as ledger:
        assert charge_of(ledger, "acme", sent.headers["x-request-id"]).charged == cost_of(gateway, usage)


@pytest.mark.parametrize("where", ["on the last chunk with text", "before the finish", "twice", "nowhere"])
def test_the_upstream_s_usage_is_billed_wherever_in_the_stream_it_comes(
    gateway: InProcessGateway, canned: CannedUpstream, where: str
) -> None:
    early = {**USAGE, "completion_tokens": 3, "total_tokens": 12}
    datas = {
        "on the last chunk with text": [*CONTENT[:-2], chunk({"content": WORDS[-1]}, usage=USAGE), CONTENT[-1]],
        "before the finish": [*CONTENT[:-1], chunk(None, usage=USAGE), CONTENT[-1]],
        "twice": [*CONTENT[:4], chunk(None, usage=early), *CONTENT[4:], chunk(None, usage=USAGE)],
        "nowhere": CONTENT,
    }[where]
    canned.answer([sse([*datas, b"[DONE]"])])
    team = gateway.open_team("acme")
    answer = gateway.post(team, "/v1/chat/completions", CHAT)
    assert answer.status_code == 200, answer.text
    chunks = [
        json.loads(line[6:], parse_float=Decimal) for line in answer.text.splitlines() if line.startswith("data: {")
    ]
    assert "".join(c["delta"].get("content") or "" for ch in chunks for c in ch["choices"]) == "".join(WORDS)
    assert all(ch["usage"] is None and ch["model"] == "fake-gpt" for ch in chunks[:-1])
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["model"] == "fake-gpt"
    charged = charge_of(gateway.runtime.store, "acme", answer.headers["x-request-id"]).charged
    if where == "nowhere":  # counted here: the gateway's count of the prompt and of the text sent
        rules = rules_for(None, "chat")
        usage = TokenUsage(input_tokens=prompt_tokens(CHAT, "chat", rules), output_tokens=rules.text("".join(WORDS)))
    else:
        usage = TokenUsage(input_tokens=9, output_tokens=9)
        assert {k: chunks[-1]["usage"][k] for k in USAGE} == USAGE
    assert charged == cost_of(gateway, usage)
    assert chunks[-1]["usage"]["cost"]["credits"] == in_credits(charged)


def anthropic_event(body: dict[str, Any]) -> bytes:
    return b"event: " + body["type"].encode() + b"\ndata: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def test_a_messages_stream_reaches_the_client_as_the_upstream_sent_it(
    gateway: InProcessGateway, canned: CannedUpstream
) -> None:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_7",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 9, "output_tokens": 1},
        },
    }
    middle = [
        anthropic_event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        anthropic_event({"type": "ping"}),
        *(
            anthropic_event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}})
            for w in WORDS
        ),
        anthropic_event({"type": "content_block_stop", "index": 0}),
    ]
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 9},
    }
    stream = (
        anthropic_event(start) + b"".join(middle) + anthropic_event(delta) + anthropic_event({"type": "message_stop"})
    )
    canned.answer([stream[i : i + 50] for i in range(0, len(stream), 50)], pause=0.0005)
    team = gateway.open_team("acme")
    answer = gateway.post(
        team,
        "/v1/messages",
        {"model": "fake-claude", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "say it"}]},
    )
    assert answer.status_code == 200, answer.text
    start["message"]["model"] = "fake-claude"
    head = b"event: message_start\ndata: " + encode(start) + b"\n\n" + b"".join(middle)
    assert answer.content.startswith(head)
    final = answer.content[len(head) :]
    charged = charge_of(gateway.runtime.store, "acme", answer.headers["x-request-id"]).charged
    assert charged == cost_of(gateway, TokenUsage(input_tokens=9, output_tokens=9), "fake-claude")
    reported = json.loads(final.split(b"\n")[1].removeprefix(b"data: "), parse_float=Decimal)
    assert final == (
        b"event: message_delta\ndata: "
        + encode({**delta, "usage": {"output_tokens": 9, **{k: reported["usage"][k] for k in ("cost", "remaining")}}})
        + b"\n\nevent: message_stop\ndata: "
        + encode({"type": "message_stop"})
        + b"\n\n"
    )
    assert reported["usage"]["cost"]["credits"] == in_credits(charged)


ANSWER = {
    "id": "chatcmpl-8",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "gpt-x",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": 'Caf\u00e9 "au" lait', "refusal": None},
            "logprobs": {"content": [{"token": "Caf", "logprob": -1.25e-07, "bytes": [67, 97, 102]}]},
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 9,
        "completion_tokens": 4,
        "total_tokens": 13,
        "prompt_tokens_details": {"cached_tokens": 0},
    },
    "service_tier": "default",
    "a_field_from_next_year": {"nested": [1, 2.5, None]},
}


@pytest.mark.parametrize("written", ["pretty", "compact"])
def test_a_plain_answer_keeps_every_member_and_its_place_with_the_client_s_model_and_the_cost(
    gateway: InProcessGateway, canned: CannedUpstream, written: str
) -> None:
    """OpenAI writes its answers indented; whatever the upstream's spacing, the client gets each
    member as it was, in its place."""
    text = json.dumps(ANSWER, indent=2) if written == "pretty" else json.dumps(ANSWER, separators=(",", ":"))
    canned.answer([text.encode()], content_type=b"application/json")
    team = gateway.open_team("acme")
    answer = gateway.post(team, "/v1/chat/completions", {**CHAT, "stream": False, "stream_options": None})
    assert answer.status_code == 200, answer.text
    got = json.loads(answer.content, parse_float=Decimal)
    charged = charge_of(gateway.runtime.store, "acme", answer.headers["x-request-id"]).charged
    assert charged == cost_of(gateway, TokenUsage(input_tokens=9, output_tokens=4))
    assert got["usage"]["cost"]["credits"] == in_credits(charged)
    expected = json.loads(json.dumps(ANSWER), parse_float=Decimal)
    expected = {
        **expected,
        "model": "fake-gpt",
        "usage": {**expected["usage"], "cost": got["usage"]["cost"], "remaining": got["usage"]["remaining"]},
    }
    assert got == expected
    assert list(got) == list(expected)
    assert list(got["usage"]) == [*ANSWER["usage"], "cost", "remaining"]


def test_a_plain_answer_without_usage_is_billed_for_what_it_answered(
    gateway: InProcessGateway, canned: CannedUpstream
) -> None:
    canned.answer(
        [json.dumps({k: v for k, v in ANSWER.items() if k != "usage"}).encode()], content_type=b"application/json"
    )
    team = gateway.open_team("acme")
    body = {**CHAT, "stream": False, "stream_options": None}
    answer = gateway.post(team, "/v1/chat/completions", body)
    assert answer.status_code == 200, answer.text
    rules = rules_for(None, "chat")
    usage = TokenUsage(input_tokens=prompt_tokens(body, "chat", rules), output_tokens=rules.text('Café "au" lait'))
    charged = charge_of(gateway.runtime.store, "acme", answer.headers["x-request-id"]).charged
    assert charged == cost_of(gateway, usage)
    got = answer.json()
    assert got["usage"]["prompt_tokens"] == usage.input_tokens
    assert list(got)[-1] == "usage"  # a member the upstream did not send comes last


@pytest.mark.parametrize(
    "content",
    [b'{"choices": [], "text": "caf\xe9"}', b'["not", "an", "object"]', b'{"choices": [}', b'{"no": "choices"}'],
    ids=["not UTF-8", "not an object", "not JSON", "without choices"],
)
def test_a_plain_answer_that_is_not_a_chat_completion_is_the_upstream_s_failure_and_costs_nothing(
    gateway: InProcessGateway, canned: CannedUpstream, content: bytes
) -> None:
    canned.answer([content], content_type=b"application/json")
    team = gateway.open_team("acme")
    answer = gateway.post(team, "/v1/chat/completions", {**CHAT, "stream": False, "stream_options": None})
    assert answer.status_code == 502, answer.text
    with ledger_of(gateway) as ledger:
        assert charge_of(ledger, "acme", answer.headers["x-request-id"]) is None
