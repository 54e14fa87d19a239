"""A Gemini client's side of translation: its request read into the canonical model, the canonical
answer and stream written in its wire, its errors in Google's shape, and its prompt counted."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from app.errors import AuthenticationFailed, InsufficientCreditsError, InvalidRequest, RateLimited
from app.tokens import prompt_tokens, rules_for
from app.translate import canonical as c
from app.translate.gemini.answer import GeminiStreamWriter, canonical_to_gemini
from app.translate.gemini.client import gemini_request_to_canonical, json_schema
from app.translate.gemini.names import camel_body
from app.translate.gemini.thoughts import signature_of, thinking_from_signature
from domain.endpoints import gemini_call
from domain.usage import TokenUsage


def read(body: dict[str, Any]) -> c.Request:
    return gemini_request_to_canonical(camel_body({"model": "m", **body}))


def user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "parts": list(parts)}


def test_turns_system_and_sampling_are_read():
    req = read(
        {
            "system_instruction": {"parts": [{"text": "be brief"}]},
            "contents": [user({"text": "hi"}), {"role": "model", "parts": [{"text": "hello"}]}, user({"text": "bye"})],
            "generation_config": {
                "temperature": 0.3,
                "top_p": 0.8,
                "top_k": 40,
                "max_output_tokens": 77,
                "stop_sequences": ["x"],
            },
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        }
    )
    assert [t.text for t in req.system] == ["be brief"]
    assert [(m.role, m.parts) for m in req.messages] == [
        ("user", [c.Text("hi")]),
        ("assistant", [c.Text("hello")]),
        ("user", [c.Text("bye")]),
    ]
    assert (req.temperature, req.top_p, req.top_k, req.max_output_tokens, req.stop) == (0.3, 0.8, 40, 77, ["x"])


def test_inline_images_in_url_safe_base64_become_standard_base64_and_files_stay_files():
    data = base64.urlsafe_b64encode(bytes(range(250, 256)) * 3).decode()
    req = read(
        {
            "contents": [
                user(
                    {"inline_data": {"mime_type": "image/png", "data": data}},
                    {"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0="}},
                    {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://x/y.jpg"}},
                )
            ]
        }
    )
    image, pdf, linked = req.messages[0].parts
    assert isinstance(image, c.Image)
    assert image.data == base64.b64encode(bytes(range(250, 256)) * 3).decode()
    assert image.media_type == "image/png"
    assert pdf == c.File("application/pdf", "JVBERi0=")
    assert linked == c.Image(media_type="image/jpeg", url="https://x/y.jpg")


def test_function_calls_without_ids_get_ids_from_their_place_and_responses_answer_them_in_order():
    req = read(
        {
            "contents": [
                user({"text": "go"}),
                {
                    "role": "model",
                    "parts": [
                        {"functionCall": {"name": "a", "args": {"x": 1}}},
                        {"functionCall": {"name": "b", "args": {}}},
                        {"functionCall": {"name": "a", "args": {"x": 2}}},
                    ],
                },
                user(
                    {"functionResponse": {"name": "a", "response": {"output": "one"}}},
                    {"functionResponse": {"name": "b", "response": {"n": 5}}},
                    {"functionResponse": {"name": "a", "response": {"result": "two"}}},
                ),
            ]
        }
    )
    calls = req.messages[1].parts
    assert [(p.id, p.name, json.loads(p.arguments)) for p in calls if isinstance(p, c.ToolCall)] == [
        ("call_1_0", "a", {"x": 1}),
        ("call_1_1", "b", {}),
        ("call_1_2", "a", {"x": 2}),
    ]
    results = req.messages[2].parts
    assert [(r.call_id, r.content) for r in results if isinstance(r, c.ToolResult)] == [
        ("call_1_0", [c.Text("one")]),
        ("call_1_1", [c.Text('{"n": 5}')]),
        ("call_1_2", [c.Text("two")]),
    ]


def test_ids_the_client_kept_are_used_and_a_response_with_no_call_is_refused():
    req = read(
        {
            "contents": [
                {"role": "model", "parts": [{"functionCall": {"id": "toolu_1", "name": "a", "args": {}}}]},
                user({"functionResponse": {"name": "a", "response": {}}}),
            ]
        }
    )
    assert req.messages[0].parts[0] == c.ToolCall("toolu_1", "a", "{}")
    result = req.messages[1].parts[0]
    assert isinstance(result, c.ToolResult)
    assert result.call_id == "toolu_1"
    with pytest.raises(InvalidRequest, match="no functionCall"):
        read({"contents": [user({"functionResponse": {"name": "a", "response": {}}})]})


def test_tools_their_schemas_and_the_calling_mode():
    req = read(
        {
            "contents": [user({"text": "hi"})],
            "tools": [
                {
                    "function_declarations": [
                        {
                            "name": "f",
                            "description": "d",
                            "parameters": {
                                "type": "OBJECT",
                                "properties": {"s": {"type": "STRING", "nullable": True}},
                                "propertyOrdering": ["s"],
                            },
                        },
                        {"name": "g", "parametersJsonSchema": {"type": "object", "properties": {"TYPE": {}}}},
                    ]
                },
                {"googleSearch": {}},
            ],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["g"]}},
        }
    )
    assert req.tools[0] == c.Tool("f", "d", {"type": "object", "properties": {"s": {"type": ["string", "null"]}}})
    assert req.tools[1].parameters == {"type": "object", "properties": {"TYPE": {}}}
    assert [t.name for t in req.builtin_tools] == ["googleSearch"]
    assert req.tool_choice == c.NamedTool("g")
    assert read({"contents": [], "toolConfig": {"functionCallingConfig": {"mode": "NONE"}}}).tool_choice == "none"
    with pytest.raises(InvalidRequest, match="mode"):
        read({"contents": [], "toolConfig": {"functionCallingConfig": {"mode": "SOMETIMES"}}})


def test_json_schema_reads_nested_items():
    assert json_schema({"type": "ARRAY", "items": {"type": "INTEGER"}}) == {
        "type": "array",
        "items": {"type": "integer"},
    }


@pytest.mark.parametrize(
    ("thinking", "effort", "mode"),
    [
        ({"thinkingBudget": 0}, "none", "disabled"),
        ({"thinkingBudget": -1}, None, "adaptive"),
        ({"thinkingBudget": 3000}, "medium", "enabled"),
        ({"thinkingLevel": "HIGH"}, "high", None),
    ],
)
def test_thinking_settings_become_effort_and_mode(thinking: dict[str, Any], effort: str | None, mode: str | None):
    req = read({"contents": [], "generationConfig": {"thinkingConfig": thinking}})
    assert (req.effort, req.thinking) == (effort, mode)


def test_structured_output_and_one_candidate_only():
    schema = read({"contents": [], "generationConfig": {"responseSchema": {"type": "OBJECT"}}}).response_format
    assert schema == {"type": "json_schema", "json_schema": {"name": "output", "schema": {"type": "object"}}}
    plain = read({"contents": [], "generationConfig": {"responseMimeType": "application/json"}}).response_format
    assert plain == {"type": "json_object"}
    with pytest.raises(InvalidRequest, match="candidateCount"):
        read({"contents": [], "generationConfig": {"candidateCount": 2}})


def test_parts_of_unknown_kinds_are_refused_and_wrong_types_named():
    with pytest.raises(InvalidRequest, match=r"contents\.0\.parts\.0"):
        read({"contents": [user({"videoMetadata": {}})]})
    with pytest.raises(InvalidRequest, match=r"contents\.0\.role"):
        read({"contents": [{"role": "robot", "parts": []}]})
    with pytest.raises(InvalidRequest, match="generationConfig"):
        read({"contents": [], "generationConfig": "hot"})


def test_reasoning_of_other_providers_survives_a_round_trip_through_the_thought_signature():
    for thinking in (c.Thinking("", signature="sig-abc"), c.Thinking("", item_id="rs_1", encrypted="gAAA")):
        packed = signature_of(thinking)
        assert packed is not None
        url_safe = base64.urlsafe_b64encode(base64.b64decode(packed)).decode().rstrip("=")
        assert thinking_from_signature("", url_safe) == thinking
    assert signature_of(c.Thinking("just text")) is None
    assert thinking_from_signature("t", "not*base64") == c.Thinking("t")
    req = read(
        {"contents": [{"role": "model", "parts": [{"text": "why", "thought": True, "thoughtSignature": packed}]}]}
    )
    assert req.messages[0].parts == [c.Thinking("why", item_id="rs_1", encrypted="gAAA")]


def test_an_answer_in_googles_shape():
    resp = c.Response(
        "r",
        "m",
        [c.Thinking("hmm", signature="s"), c.Text("hi"), c.ToolCall("call_9", "f", '{"a": 1}')],
        "tool_calls",
        TokenUsage(input_tokens=10, output_tokens=8, cache_hit_tokens=4),
        reasoning_tokens=3,
    )
    body = canonical_to_gemini(resp, "m", False, {"cost": {"credits": "0.1"}})
    (candidate,) = body["candidates"]
    thought, text, call = candidate["content"]["parts"]
    assert thought["thought"] is True
    assert "text" not in thought  # the client did not ask for thoughts
    assert thinking_from_signature("", thought["thoughtSignature"]).signature == "s"
    assert text == {"text": "hi"}
    assert call == {"functionCall": {"id": "call_9", "name": "f", "args": {"a": 1}}}
    assert candidate["finishReason"] == "STOP"
    assert body["usageMetadata"] == {
        "promptTokenCount": 14,
        "candidatesTokenCount": 5,
        "totalTokenCount": 22,
        "cachedContentTokenCount": 4,
        "thoughtsTokenCount": 3,
        "cost": {"credits": "0.1"},
    }
    assert canonical_to_gemini(resp, "m", True, {})["candidates"][0]["content"]["parts"][0]["text"] == "hmm"
    cut = c.Response("r", "m", [c.Text("x")], "length", None)
    assert canonical_to_gemini(cut, "m", False, {})["candidates"][0]["finishReason"] == "MAX_TOKENS"


def _events(writer: GeminiStreamWriter) -> list[bytes]:
    frames = writer.start()
    for event in (
        c.TextDelta("He"),
        c.TextDelta("llo"),
        c.ToolCallStarted("call_1", "f"),
        c.ToolArgumentsDelta('{"a"'),
        c.ToolArgumentsDelta(": 2}"),
        c.Finished("tool_calls"),
    ):
        frames += writer.event(event)
    return frames + writer.finish(TokenUsage(input_tokens=3, output_tokens=4), 0, {"cost": {"credits": "1"}})


def test_a_stream_as_server_sent_events_sends_a_function_call_whole():
    frames = _events(GeminiStreamWriter("m", False))
    chunks = [json.loads(f.removeprefix(b"data: ")) for f in frames]
    assert all(f.endswith(b"\r\n\r\n") for f in frames)
    parts = [p for ch in chunks for p in ch["candidates"][0].get("content", {}).get("parts", [])]
    assert parts == [{"text": "He"}, {"text": "llo"}, {"functionCall": {"id": "call_1", "name": "f", "args": {"a": 2}}}]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert chunks[-1]["usageMetadata"]["totalTokenCount"] == 7
    assert chunks[-1]["usageMetadata"]["cost"] == {"credits": "1"}
    assert len({ch["responseId"] for ch in chunks}) == 1


def test_a_stream_without_sse_is_one_json_array_even_when_it_breaks():
    chunks = json.loads(b"".join(_events(GeminiStreamWriter("m", False, sse=False))))
    assert len(chunks) == 4
    broken = GeminiStreamWriter("m", False, sse=False)
    frames = broken.start() + broken.event(c.TextDelta("a")) + broken.error(RateLimited("slow down"))
    assert json.loads(b"".join(frames))[-1] == {
        "error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}
    }


def test_errors_in_googles_shape():
    assert AuthenticationFailed("no").gemini_body() == {
        "error": {"code": 401, "message": "no", "status": "UNAUTHENTICATED"}
    }
    short = InsufficientCreditsError("poor").affording(12, "generationConfig.maxOutputTokens").gemini_body()
    assert short == {
        "error": {
            "code": 402,
            "message": short["error"]["message"],
            "status": "FAILED_PRECONDITION",
            "affordable_max_tokens": 12,
        }
    }


def test_the_prompt_is_counted_like_the_other_wires():
    rules = rules_for(None, "chat")
    small = prompt_tokens({"contents": [user({"text": "hello"})]}, "gemini", rules)
    larger = prompt_tokens(
        {
            "systemInstruction": {"parts": [{"text": "be brief and kind to everyone"}]},
            "contents": [user({"text": "hello"})],
            "tools": [{"functionDeclarations": [{"name": "lookup", "parameters": {"type": "OBJECT"}}]}],
        },
        "gemini",
        rules,
    )
    assert 0 < small < larger
    signed = prompt_tokens({"contents": [user({"text": "hello", "thoughtSignature": "A" * 4000})]}, "gemini", rules)
    assert signed == small


def test_the_model_and_method_of_a_gemini_path():
    assert gemini_call("/v1beta/models/gemini-x:generateContent") == ("gemini-x", "generateContent")
    assert gemini_call("/v1/models/models/us.anthropic.claude-v1:0:streamGenerateContent") == (
        "us.anthropic.claude-v1:0",
        "streamGenerateContent",
    )
    assert gemini_call("/v1beta/models/org/model:countTokens") == ("org/model", "countTokens")
    assert gemini_call("/v1/models/us.anthropic.claude-v1:0") is None  # OpenAI's model route
    assert gemini_call("/v1beta/models/:generateContent") is None
    assert gemini_call("/v1/chat/completions") is None
