"""Google's Gemini API in front of Tollgate, through real sockets with Google's own SDK
(``google.genai.Client`` pointed at the gateway) and with raw HTTP for what the SDK does not send:
``generateContent``, ``streamGenerateContent`` (SSE and the JSON array), ``countTokens`` and the model
list, translated for an OpenAI chat upstream (fake-gpt), an Anthropic one (fake-claude), a Responses
one (fake-codex) and the demo; every answer's reported cost (``usageMetadata.cost``) is its ledger
charge, and every refusal is in Google's error shape, read by the SDK as an ``APIError``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors, types

from tests.e2e.test_request_lookup import lookup
from tests.support import plain_http
from tests.support.charges import charged
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway
from tests.support.images import png
from tests.support.teams import Team, Teams

HELLO = "hello there gateway"
#: Each upstream kind a Gemini client reaches: the chat fake, the Anthropic fake, the Responses fake, the demo.
MODELS = ["fake-gpt", "fake-claude", "fake-codex", "demo-gpt"]


@pytest.fixture
def gemini(gateway: Gateway, team: Team) -> Iterator[genai.Client]:
    client = genai.Client(api_key=team.key, http_options=types.HttpOptions(base_url=gateway.root_url))
    yield client
    client.close()


def cost_of(usage: dict[str, Any]) -> int:
    """The cost ``usageMetadata`` reports, in micro-credits (exact)."""
    micros = Decimal(str(usage["cost"]["credits"])) * 1_000_000
    assert micros == micros.to_integral_value()
    return int(micros)


def post(gateway: Gateway, path: str, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
    return plain_http.post(gateway.root_url + path, json=body, timeout=30, **kwargs)


def sse_chunks(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("model", MODELS)
def test_generate_content_is_translated_and_charged_what_it_reports(
    gateway: Gateway, team: Team, gemini: genai.Client, model: str
) -> None:
    answer = gemini.models.generate_content(
        model=model,
        contents=HELLO,
        config=types.GenerateContentConfig(max_output_tokens=100, should_return_http_response=True),
    )
    assert answer.sdk_http_response is not None
    assert answer.sdk_http_response.body is not None
    raw = json.loads(answer.sdk_http_response.body)
    (candidate,) = raw["candidates"]
    assert candidate["content"]["role"] == "model"
    assert "".join(p.get("text", "") for p in candidate["content"]["parts"])
    assert candidate["finishReason"] == "STOP"
    assert raw["modelVersion"] == model
    usage = raw["usageMetadata"]
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"]
    assert usage["promptTokenCount"] > 0
    assert cost_of(usage) == charged(gateway, team)[0] > 0
    typed = gemini.models.generate_content(model=model, contents=HELLO)
    assert typed.text
    assert typed.usage_metadata is not None
    assert typed.usage_metadata.prompt_token_count == usage["promptTokenCount"]
    assert len(charged(gateway, team)) == 2


def test_the_chat_upstream_gets_the_translated_request(
    gateway: Gateway, gemini: genai.Client, fake_upstream: FakeUpstream
) -> None:
    answer = gemini.models.generate_content(
        model="fake-gpt",
        contents=HELLO,
        config=types.GenerateContentConfig(
            system_instruction="be brief",
            max_output_tokens=50,
            temperature=0.5,
            top_p=0.9,
            stop_sequences=["zzz"],
            safety_settings=[
                types.SafetySetting(
                    category=types.HarmCategory.HARM_CATEGORY_HARASSMENT, threshold=types.HarmBlockThreshold.BLOCK_NONE
                )
            ],
        ),
    )
    assert answer.text == f"Echo: {HELLO}"
    (sent,) = fake_upstream.requests
    assert sent.body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": HELLO},
    ]
    assert sent.body["temperature"] == 0.5
    assert sent.body["top_p"] == 0.9
    assert sent.body["stop"] == ["zzz"]
    assert "safetySettings" not in json.dumps(sent.body)


def test_geminis_own_tools_are_dropped_and_named_and_the_query_key_is_not_logged(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream
) -> None:
    body = {"contents": [{"parts": [{"text": HELLO}]}], "tools": [{"googleSearch": {}}]}
    response = post(gateway, "/v1beta/models/fake-gpt:generateContent", body, params={"key": team.key})
    assert response.status_code == 200, response.text
    assert response.headers["x-tollgate-dropped-tools"] == "googleSearch"
    (sent,) = fake_upstream.requests
    assert "tools" not in sent.body
    assert gateway.log_path is not None
    assert team.key not in gateway.log_path.read_text()


@pytest.mark.parametrize("model", ["fake-gpt", "fake-claude", "fake-codex"])
def test_a_stream_over_sse_reports_the_cost_it_is_charged(gateway: Gateway, team: Team, model: str) -> None:
    response = post(
        gateway,
        f"/v1beta/models/{model}:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": HELLO}]}]},
        headers={"x-goog-api-key": team.key},
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks = sse_chunks(response.text)
    text = "".join(p.get("text", "") for ch in chunks for p in ch["candidates"][0].get("content", {}).get("parts", []))
    assert text == f"Echo: {HELLO}"
    last = chunks[-1]
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert cost_of(last["usageMetadata"]) == charged(gateway, team)[0] > 0


def test_the_sdk_reads_a_stream(gateway: Gateway, team: Team, gemini: genai.Client) -> None:
    chunks = list(gemini.models.generate_content_stream(model="fake-claude", contents=HELLO))
    assert "".join(chunk.text or "" for chunk in chunks) == f"Echo: {HELLO}"
    final = chunks[-1]
    assert final.candidates
    assert final.candidates[0].finish_reason == types.FinishReason.STOP
    assert final.usage_metadata is not None
    assert final.usage_metadata.total_token_count
    assert len(charged(gateway, team)) == 1


def test_a_stream_without_alt_sse_is_one_json_array_and_its_retry_the_same_array(gateway: Gateway, team: Team) -> None:
    def streamed() -> httpx.Response:
        return post(
            gateway,
            "/v1beta/models/fake-gpt:streamGenerateContent",
            {"contents": [{"parts": [{"text": HELLO}]}]},
            params={"key": team.key},
            headers={"idempotency-key": "gemini-array-1"},
        )

    response = streamed()
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    chunks = response.json()
    assert isinstance(chunks, list)
    assert len(chunks) > 1
    assert cost_of(chunks[-1]["usageMetadata"]) == charged(gateway, team)[0]
    retried = streamed()
    assert retried.headers["idempotent-replayed"] == "true"
    assert retried.headers["content-type"].startswith("application/json")
    assert retried.json() == chunks
    assert len(charged(gateway, team)) == 1


@pytest.mark.parametrize("model", ["fake-gpt", "fake-claude"])
def test_a_function_call_round_trip(gateway: Gateway, team: Team, gemini: genai.Client, model: str) -> None:
    lookup = types.FunctionDeclaration(
        name="lookup",
        description="Look a word up",
        parameters=types.Schema(
            type=types.Type.OBJECT, properties={"word": types.Schema(type=types.Type.STRING)}, required=["word"]
        ),
    )
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[lookup])],
        tool_config=types.ToolConfig(
            function_calling_config=types.FunctionCallingConfig(mode=types.FunctionCallingConfigMode.ANY)
        ),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    ask = types.Content(role="user", parts=[types.Part(text='find it [[tool:lookup {"word": "gate"}]]')])
    first = gemini.models.generate_content(model=model, contents=[ask], config=config)
    (call,) = first.function_calls or []
    assert call.name == "lookup"
    assert call.args == {"word": "gate"}
    assert call.id
    assert first.candidates
    assert first.candidates[0].content is not None
    answered = types.Part.from_function_response(name="lookup", response={"output": "a way through"})
    second = gemini.models.generate_content(
        model=model,
        contents=[ask, first.candidates[0].content, types.Content(role="user", parts=[answered])],
        config=config.model_copy(update={"tool_config": None}),
    )
    assert second.text is not None
    assert "a way through" in second.text
    assert len(charged(gateway, team)) == 2


@pytest.mark.parametrize("model", ["fake-gpt", "fake-claude", "fake-codex"])
def test_a_streamed_function_call_comes_whole_in_one_chunk(gateway: Gateway, team: Team, model: str) -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": 'find it [[tool:lookup {"word": "gate"}]]'}]}],
        "tools": [{"functionDeclarations": [{"name": "lookup", "parameters": {"type": "OBJECT"}}]}],
    }
    response = post(
        gateway,
        f"/v1beta/models/{model}:streamGenerateContent",
        body,
        params={"alt": "sse"},
        headers={"x-goog-api-key": team.key},
    )
    assert response.status_code == 200, response.text
    chunks = sse_chunks(response.text)
    parts = [p for ch in chunks for p in ch["candidates"][0].get("content", {}).get("parts", [])]
    (call,) = [p["functionCall"] for p in parts if "functionCall" in p]
    assert (call["name"], call["args"]) == ("lookup", {"word": "gate"})
    assert call["id"]
    assert cost_of(chunks[-1]["usageMetadata"]) == charged(gateway, team)[0]


def test_function_calls_without_ids_are_matched_by_name_and_order(
    gateway: Gateway, team: Team, fake_upstream: FakeUpstream
) -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "look two words up"}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"name": "lookup", "args": {"word": "a"}}},
                    {"functionCall": {"name": "lookup", "args": {"word": "b"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "lookup", "response": {"output": "first"}}},
                    {"functionResponse": {"name": "lookup", "response": {"output": "second"}}},
                ],
            },
        ],
        "tools": [{"functionDeclarations": [{"name": "lookup", "parameters": {"type": "OBJECT"}}]}],
    }
    response = post(gateway, "/v1beta/models/fake-gpt:generateContent", body, headers={"x-goog-api-key": team.key})
    assert response.status_code == 200, response.text
    (sent,) = fake_upstream.requests
    calls = sent.body["messages"][1]["tool_calls"]
    results = sent.body["messages"][2:4]
    assert [c["id"] for c in calls] == ["call_1_0", "call_1_1"]
    assert [(r["tool_call_id"], r["content"]) for r in results] == [("call_1_0", "first"), ("call_1_1", "second")]
    assert sent.body["tools"][0]["function"]["parameters"] == {"type": "object"}


def test_an_inline_image_reaches_a_vision_model(gateway: Gateway, team: Team, gemini: genai.Client) -> None:
    image = types.Part.from_bytes(data=png(64, 64), mime_type="image/png")
    answer = gemini.models.generate_content(model="vision-gpt", contents=[image, "what is this?"])
    assert answer.text
    refused = _refused(lambda: gemini.models.generate_content(model="fake-gpt", contents=[image, "what is this?"]))
    assert (refused.code, refused.status) == (400, "INVALID_ARGUMENT")
    assert len(charged(gateway, team)) == 1


def test_count_tokens_counts_without_charging(gateway: Gateway, team: Team, gemini: genai.Client) -> None:
    counted = gemini.models.count_tokens(model="fake-gpt", contents=HELLO)
    assert counted.total_tokens is not None
    assert counted.total_tokens > 0
    longer = gemini.models.count_tokens(model="fake-gpt", contents=HELLO + " and much more text to count here")
    assert longer.total_tokens is not None
    assert longer.total_tokens > counted.total_tokens
    wrapped = post(
        gateway,
        "/v1beta/models/fake-gpt:countTokens",
        {"generateContentRequest": {"model": "models/fake-gpt", "contents": [{"parts": [{"text": HELLO}]}]}},
        headers={"x-goog-api-key": team.key},
    )
    assert wrapped.json() == {"totalTokens": counted.total_tokens}
    assert charged(gateway, team) == []


def test_the_model_list_and_a_model_in_googles_shape(gateway: Gateway, gemini: genai.Client) -> None:
    listed = list(gemini.models.list())
    names = [m.name for m in listed]
    assert "models/fake-gpt" in names
    assert "models/fake-claude" in names
    model = gemini.models.get(model="fake-gpt")
    assert model.name == "models/fake-gpt"
    assert (model.display_name, model.input_token_limit, model.output_token_limit) == ("Fake GPT", 8192, 1024)
    assert model.supported_actions is not None
    assert "generateContent" in model.supported_actions
    page = plain_http.get(gateway.root_url + "/v1beta/models", params={"pageSize": 2}).json()
    assert len(page["models"]) == 2
    rest = plain_http.get(gateway.root_url + "/v1beta/models", params={"pageToken": page["nextPageToken"]}).json()
    assert [m["name"] for m in page["models"] + rest["models"]] == names
    missing = _refused(lambda: gemini.models.get(model="no-such-model"))
    assert (missing.code, missing.status) == (404, "NOT_FOUND")


@pytest.mark.parametrize("place", ["header", "query", "bearer"])
def test_the_key_in_each_place_google_clients_put_it(gateway: Gateway, team: Team, place: str) -> None:
    body = {"contents": [{"parts": [{"text": HELLO}]}]}
    where: dict[str, Any] = {
        "header": {"headers": {"x-goog-api-key": team.key}},
        "query": {"params": {"key": team.key}},
        "bearer": {"headers": {"authorization": f"Bearer {team.key}"}},
    }[place]
    response = post(gateway, "/v1beta/models/models/demo-gpt:generateContent", body, **where)
    assert response.status_code == 200, response.text
    assert cost_of(response.json()["usageMetadata"]) == charged(gateway, team)[0]
    v1 = post(gateway, "/v1/models/demo-gpt:generateContent", body, **where)
    assert v1.status_code == 200, v1.text
    assert len(charged(gateway, team)) == 2
    if place == "header":  # the request is kept, under its endpoint, for GET /v1/requests/{id}
        found = lookup(gateway, team, v1.headers["x-request-id"])
        assert (found["endpoint"], found["model"]) == ("generate_content", "demo-gpt")
        assert Decimal(str(found["total_cost"])) == Decimal(str(v1.json()["usageMetadata"]["cost"]["credits"]))


def _refused(call: Any) -> errors.APIError:
    with pytest.raises(errors.APIError) as refused:
        call()
    return refused.value


def test_refusals_in_googles_shape(gateway: Gateway, teams: Teams, team: Team) -> None:
    body = {"contents": [{"parts": [{"text": HELLO}]}]}
    url = "/v1beta/models/fake-gpt:generateContent"
    wrong = post(gateway, url, body, headers={"x-goog-api-key": "tg-not-a-key"})
    assert wrong.status_code == 401
    assert wrong.json()["error"]["status"] == "UNAUTHENTICATED"
    assert wrong.json()["error"]["code"] == 401
    none = post(gateway, url, body)
    assert (none.status_code, none.json()["error"]["status"]) == (401, "UNAUTHENTICATED")
    assert "x-goog-api-key" in none.json()["error"]["message"]
    unknown = post(gateway, "/v1beta/models/nope:generateContent", body, headers={"x-goog-api-key": team.key})
    assert (unknown.status_code, unknown.json()["error"]["status"]) == (404, "NOT_FOUND")
    bad = post(gateway, url, {"contents": "nope"}, headers={"x-goog-api-key": team.key})
    assert (bad.status_code, bad.json()["error"]["status"]) == (400, "INVALID_ARGUMENT")
    two = post(gateway, url, {**body, "generationConfig": {"candidateCount": 2}}, headers={"x-goog-api-key": team.key})
    assert (two.status_code, two.json()["error"]["status"]) == (400, "INVALID_ARGUMENT")
    poor = teams.open("0.000001")
    broke = post(gateway, url, body, headers={"x-goog-api-key": poor.key})
    assert broke.status_code == 402
    error = broke.json()["error"]
    assert error["status"] == "FAILED_PRECONDITION"
    assert error["code"] == 402
    assert "affordable_max_tokens" in error
    assert charged(gateway, team) == charged(gateway, poor) == []


def test_a_key_kept_to_other_endpoints_a_rate_limit_and_an_output_limit_over_the_models(
    gateway: Gateway, teams: Teams
) -> None:
    body = {"contents": [{"parts": [{"text": HELLO}]}]}
    url = "/v1beta/models/fake-gpt:generateContent"
    gateway.cli("team", "create", "gemini-messages-only", "--credits", "5")
    kept = gateway.cli("key", "create", "--team", "gemini-messages-only", "--endpoints", "messages").stdout
    denied = post(gateway, url, body, headers={"x-goog-api-key": kept.splitlines()[-1]})
    assert (denied.status_code, denied.json()["error"]["status"]) == (403, "PERMISSION_DENIED")
    assert "/v1beta/models/{model}:generateContent" in denied.json()["error"]["message"]
    assert denied.headers["x-should-retry"] == "false"
    limited = teams.open("100", key_rpm=1)
    assert post(gateway, url, body, headers={"x-goog-api-key": limited.key}).status_code == 200
    over = post(gateway, url, body, headers={"x-goog-api-key": limited.key})
    assert (over.status_code, over.json()["error"]["status"]) == (429, "RESOURCE_EXHAUSTED")
    team = teams.open("100")
    big = post(
        gateway, url, {**body, "generationConfig": {"maxOutputTokens": 5000}}, headers={"x-goog-api-key": team.key}
    )
    assert (big.status_code, big.json()["error"]["status"]) == (400, "INVALID_ARGUMENT")
    assert "generationConfig.maxOutputTokens" in big.json()["error"]["message"]
    assert charged(gateway, team) == []
    assert len(charged(gateway, limited)) == 1


def test_the_sdk_reads_refusals_as_api_errors(gateway: Gateway, teams: Teams, team: Team) -> None:
    clients: list[genai.Client] = []

    def client(key: str) -> genai.Client:
        clients.append(genai.Client(api_key=key, http_options=types.HttpOptions(base_url=gateway.root_url)))
        return clients[-1]

    wrong = _refused(lambda: client("tg-not-a-key").models.generate_content(model="fake-gpt", contents=HELLO))
    assert (wrong.code, wrong.status) == (401, "UNAUTHENTICATED")
    unknown = _refused(lambda: client(team.key).models.generate_content(model="nope", contents=HELLO))
    assert (unknown.code, unknown.status) == (404, "NOT_FOUND")
    poor = teams.open("0.000001")
    broke = _refused(lambda: client(poor.key).models.generate_content(model="fake-gpt", contents=HELLO))
    assert (broke.code, broke.status) == (402, "FAILED_PRECONDITION")
    streamed = _refused(lambda: list(client(poor.key).models.generate_content_stream(model="fake-gpt", contents=HELLO)))
    assert (streamed.code, streamed.status) == (402, "FAILED_PRECONDITION")
    assert charged(gateway, poor) == []


def test_json_output_and_thinking_settings_are_translated(
    gateway: Gateway, gemini: genai.Client, fake_upstream: FakeUpstream
) -> None:
    schema = {"type": "object", "properties": {"word": {"type": "string"}}}
    gemini.models.generate_content(
        model="fake-gpt",
        contents=HELLO,
        config=types.GenerateContentConfig(
            response_mime_type="application/json",
            response_json_schema=schema,
            thinking_config=types.ThinkingConfig(thinking_budget=20000),
        ),
    )
    (sent,) = fake_upstream.requests
    assert sent.body["response_format"]["json_schema"]["schema"] == schema
    assert sent.body["reasoning_effort"] == "high"


def test_anthropic_thinking_comes_back_to_anthropic_through_the_thought_signature(
    gemini: genai.Client, fake_upstream: FakeUpstream
) -> None:
    config = types.GenerateContentConfig(
        max_output_tokens=4000, thinking_config=types.ThinkingConfig(include_thoughts=True, thinking_budget=2048)
    )
    ask = types.Content(role="user", parts=[types.Part(text="think first [[think]]")])
    first = gemini.models.generate_content(model="fake-claude", contents=[ask], config=config)
    assert first.candidates
    assert first.candidates[0].content
    assert first.candidates[0].content.parts
    thought = first.candidates[0].content.parts[0]
    assert thought.thought is True
    assert thought.text
    assert thought.thought_signature
    (sent,) = fake_upstream.requests
    assert sent.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    fake_upstream.clear()
    gemini.models.generate_content(
        model="fake-claude",
        contents=[ask, first.candidates[0].content, types.Content(role="user", parts=[types.Part(text="and now?")])],
        config=config,
    )
    (again,) = fake_upstream.requests
    block = again.body["messages"][1]["content"][0]
    assert block["type"] == "thinking"
    assert block["thinking"] == thought.text
    state = json.loads(thought.thought_signature.removeprefix(b"tollgate:"))  # Anthropic's, carried in Gemini's slot
    assert block["signature"] == state["signature"]
