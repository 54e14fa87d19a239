"""The Converse wire's side of the translation: a canonical request as bedrock-runtime's Converse body
(its shapes as botocore's service model gives them), and Converse's answers and stream events read back."""

from __future__ import annotations

import json

import pytest

from app.errors import InvalidRequest
from app.translate import canonical as c
from app.translate.converse.upstream import ConverseEventReader, canonical_to_converse_body, converse_to_canonical
from app.translate.tools import ToolNames

LOOKUP = c.Tool("lookup", "finds it", {"type": "object", "properties": {}})


def body(req: c.Request) -> dict[str, object]:
    return canonical_to_converse_body(req, 4096, ToolNames(req.tools, flatten=True))


def test_a_tool_loop_becomes_converse_blocks_with_alternating_roles():
    req = c.Request(
        model="m",
        system=[c.Text("be brief")],
        messages=[
            c.Message("user", [c.Text("find it"), c.Image("image/png", "iVBORw0")]),
            c.Message("assistant", [c.ToolCall("call.1", "lookup", '{"q": 1}')]),
            c.Message("user", [c.ToolResult("call.1", [c.Text("here")], is_error=True)]),
            c.Message("user", [c.Text("and?")]),
        ],
        tools=[LOOKUP],
        tool_choice="required",
        max_output_tokens=50,
        temperature=1.5,
        top_k=5,
        stop=["END", " "],
    )
    sent = body(req)
    assert sent["system"] == [{"text": "be brief"}]
    assert sent["messages"] == [
        {
            "role": "user",
            "content": [{"text": "find it"}, {"image": {"format": "png", "source": {"bytes": "iVBORw0"}}}],
        },
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "call_1", "name": "lookup", "input": {"q": 1}}}]},
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "call_1", "content": [{"text": "here"}], "status": "error"}},
                {"text": "and?"},
            ],
        },
    ]
    assert sent["inferenceConfig"] == {"maxTokens": 50, "temperature": 1.0, "stopSequences": ["END"]}
    assert sent["additionalModelRequestFields"] == {"top_k": 5}
    spec = {"name": "lookup", "description": "finds it", "inputSchema": {"json": LOOKUP.parameters}}
    assert sent["toolConfig"] == {"tools": [{"toolSpec": spec}], "toolChoice": {"any": {}}}


def test_tool_choice_none_sends_no_tools_and_a_named_one_is_converses_tool():
    none = body(c.Request(model="m", messages=[c.Message("user", [c.Text("x")])], tools=[LOOKUP], tool_choice="none"))
    assert "toolConfig" not in none
    named = c.Request(model="m", messages=[c.Message("user", [c.Text("x")])], tools=[LOOKUP])
    named.tool_choice = c.NamedTool("lookup")
    assert body(named)["toolConfig"]["toolChoice"] == {"tool": {"name": "lookup"}}  # type: ignore[index]


@pytest.mark.parametrize(
    "part", [c.Image(url="https://x/cat.png"), c.Image("image/bmp", "Qk0="), c.File("application/pdf", "JVBE")]
)
def test_what_converse_cannot_take_is_the_clients_error(part: c.Image | c.File):
    with pytest.raises(InvalidRequest):
        body(c.Request(model="m", messages=[c.Message("user", [part])]))


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("guardrail_intervened", "content_filter"),
        ("content_filtered", "content_filter"),
    ],
)
def test_an_answers_stop_reason_and_usage(stop: str, finish: str):
    answer = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": "hm", "signature": "sig"}}},
                    {"text": "hi"},
                    {"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"q": 1}}},
                ],
            }
        },
        "stopReason": stop,
        "usage": {"inputTokens": 7, "outputTokens": 3, "totalTokens": 10, "cacheReadInputTokens": 2},
    }
    resp = converse_to_canonical(answer)
    assert resp.finish == finish
    assert resp.parts == [c.Thinking("hm", "sig"), c.Text("hi"), c.ToolCall("t1", "lookup", json.dumps({"q": 1}))]
    assert resp.usage is not None
    assert (resp.usage.input_tokens, resp.usage.output_tokens, resp.usage.cache_hit_tokens) == (7, 3, 2)


def test_a_converse_stream_reads_as_canonical_events():
    reader = ConverseEventReader()
    events = [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"text": "Hi"}}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"contentBlockStart": {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "t1", "name": "lookup"}}}},
        {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"q"'}}}},
        {"contentBlockDelta": {"contentBlockIndex": 2, "delta": {"reasoningContent": {"text": "hm"}}}},
        {"messageStop": {"stopReason": "tool_use"}},
        {"metadata": {"usage": {"inputTokens": 5, "outputTokens": 2, "totalTokens": 7}, "metrics": {"latencyMs": 1}}},
    ]
    read = [event for raw in events for event in reader.events(raw)]
    assert read[:5] == [
        c.TextDelta("Hi"),
        c.ToolCallStarted("t1", "lookup"),
        c.ToolArgumentsDelta('{"q"'),
        c.ThinkingDelta("hm"),
        c.Finished("tool_calls"),
    ]
    (usage,) = read[5:]
    assert isinstance(usage, c.UsageReported)
    assert (usage.usage.input_tokens, usage.usage.output_tokens) == (5, 2)
