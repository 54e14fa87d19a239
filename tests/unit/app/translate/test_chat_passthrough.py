"""A chat stream passed through: each chunk goes out as the upstream wrote it, with only the model's
name changed (and ``usage`` as the client asked), whether a read brought one chunk or many; what the
bill is made from (text, reasoning, tool calls, usage) is the same either way; the final usage chunk
is built as it always was."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from app.json import encode
from app.tokens import rules_for
from app.tokens.delivered import Delivered
from app.translate import canonical as c
from app.translate.chat.passthrough import ChatPassThrough
from app.upstream.base import StreamEvent
from domain.usage import TokenUsage

USAGE = {
    "prompt_tokens": 12,
    "completion_tokens": 5,
    "total_tokens": 17,
    "prompt_tokens_details": {"cached_tokens": 2},
    "completion_tokens_details": {"reasoning_tokens": 1},
}
EXTRA = {"cost": {"usd": Decimal("0.00012"), "credits": Decimal("0.012")}, "remaining": {"credits": Decimal("99.5")}}


def chunk(delta: dict[str, Any] | None = None, *, usage: Any = None, choices: bool = True, **extra: Any) -> bytes:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-x",
        "system_fingerprint": "fp_1",
        "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": None}] if choices else [],
        **extra,
    }
    if usage is not ...:
        body["usage"] = usage
    return json.dumps(body, separators=(",", ":")).encode()


TEXT = [
    chunk({"role": "assistant", "content": ""}),
    *(chunk({"content": w}) for w in ["Hello", " there", ","]),
    chunk({"reasoning_content": "hmm"}),
    chunk({"content": " friend"}),
    chunk({}, finish_reason="stop"),
]
STREAMS = {
    "text": [*TEXT, chunk(usage=USAGE, choices=False)],
    "usage absent": [
        chunk({"content": "a"}, usage=...),
        chunk({"content": "b"}, usage=...),
        chunk(usage=USAGE, choices=False),
    ],
    "tool call": [
        TEXT[0],
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "call_1", "type": "function", "function": {"name": "Bash", "arguments": ""}}
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"command":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"ls"}'}}]}),
        chunk(usage=USAGE, choices=False),
    ],
    "usage on a chunk with choices": [*TEXT[:3], chunk({"content": "!"}, usage=USAGE)],
    "no usage": TEXT,
    "spaced and nested": [
        TEXT[0],
        (
            b'{"id": "chatcmpl-1", "model": "gpt-x", "choices": [{"delta": {"content": "x"}}], '
            b'"usage": null, "meta": {"model": "gpt-x"}}'
        ),
        (
            b'{"id":"chatcmpl-1","meta":{"model":"gpt-x"},"model":"gpt-x",'
            b'"choices":[{"delta":{"content":"y"}}],"usage":null}'
        ),
        b'{"id":"chatcmpl-1","model":"gpt-x","choices":[{"delta":{"content":"z"}}],\n"usage":null}',
        chunk(usage=USAGE, choices=False),
    ],
}


def relay(frames: list[bytes], include_usage: bool, reads: list[list[int]]) -> tuple[bytes, Delivered, Any]:
    """The client's bytes, what was delivered and the final usage, with the chunks arriving in
    ``reads`` (lists of the chunks' indices)."""
    passthrough = ChatPassThrough("fake-gpt", include_usage)
    delivered = Delivered(rules_for(None, "chat"), 7)
    out, usage = [], None
    for read in reads:
        sent, events, failure = passthrough.relay([StreamEvent(frames[i]) for i in read])
        assert failure is None
        out += sent
        for event in events:
            if isinstance(event, c.UsageReported):
                usage = event.usage
            else:
                c.deliver(event, delivered)
    charged = usage or delivered.usage()
    return b"".join(out) + b"".join(passthrough.finish(charged, 0, EXTRA)), delivered, usage


def splits(count: int) -> dict[str, list[list[int]]]:
    return {
        "one read": [list(range(count))],
        "one per read": [[i] for i in range(count)],
        "two reads": [list(range(count // 2)), list(range(count // 2, count))],
    }


def client_chunks(body: bytes) -> list[bytes]:
    assert body.endswith(b"\n\n")
    events = body[:-2].split(b"\n\n")
    return [b"\n".join(line.removeprefix(b"data: ") for line in event.split(b"\n")) for event in events]


@pytest.mark.parametrize("include_usage", [True, False], ids=["include_usage", "no usage asked"])
@pytest.mark.parametrize("name", list(STREAMS))
def test_however_the_chunks_arrive_the_client_gets_the_same_bytes_and_the_bill_the_same_text(
    name: str, include_usage: bool
) -> None:
    frames = STREAMS[name]
    results = {how: relay(frames, include_usage, reads) for how, reads in splits(len(frames)).items()}
    bodies = {how: body for how, (body, _, _) in results.items()}
    assert len(set(bodies.values())) == 1, bodies
    counts = {(d.output_tokens(), u) for _, d, u in results.values()}
    assert len(counts) == 1


@pytest.mark.parametrize("include_usage", [True, False], ids=["include_usage", "no usage asked"])
def test_each_chunk_goes_out_as_the_upstream_wrote_it_with_the_client_s_model(include_usage: bool) -> None:
    frames = STREAMS["text"]
    body, delivered, usage = relay(frames, include_usage, [list(range(len(frames)))])
    sent = client_chunks(body)
    expected = [f.replace(b'"model":"gpt-x"', b'"model":"fake-gpt"') for f in frames[:-1]]
    if not include_usage:
        expected = [f.replace(b',"usage":null', b"") for f in expected]
    assert sent[: len(expected)] == expected
    assert usage == TokenUsage(input_tokens=10, output_tokens=5, cache_hit_tokens=2)
    assert delivered.output_tokens() > 0
    final = sent[len(expected) :]
    if not include_usage:
        assert final == [b"[DONE]"]
        return
    # The usage chunk, as every release built it: the upstream's usage with the cost after it.
    assert final == [
        encode(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1700000000,
                "model": "fake-gpt",
                "choices": [],
                "usage": {**USAGE, **EXTRA},
                "system_fingerprint": "fp_1",
            }
        ),
        b"[DONE]",
    ]


def test_a_usage_report_on_a_chunk_with_choices_is_taken_out_of_it_and_sent_at_the_end() -> None:
    frames = STREAMS["usage on a chunk with choices"]
    body, _, usage = relay(frames, True, [list(range(len(frames)))])
    sent = [json.loads(s) for s in client_chunks(body)[:-1]]
    assert sent[-2]["choices"][0]["delta"] == {"content": "!"}
    assert sent[-2]["usage"] is None
    assert sent[-1]["choices"] == []
    assert sent[-1]["usage"]["completion_tokens"] == 5
    assert usage is not None


def test_nested_names_and_other_spacing_are_never_spliced_wrongly() -> None:
    frames = STREAMS["spaced and nested"]
    body, _, _ = relay(frames, True, [list(range(len(frames)))])
    for sent in client_chunks(body)[1:4]:
        found = json.loads(sent)
        assert found["model"] == "fake-gpt"
        assert found.get("meta", {"model": "gpt-x"}) == {"model": "gpt-x"}  # not the client's: not touched
