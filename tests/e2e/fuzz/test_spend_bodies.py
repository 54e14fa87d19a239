"""Generated bodies for the endpoints beyond the OpenAI and Anthropic text wires: image generation and
speech (JSON), the Gemini API's generateContent (JSON, translated to an Anthropic model and passed
through to a Gemini one), and the uploads (multipart: audio to transcribe or translate, an image to
edit, a batch input file). The rules are the other fuzzers' (tests/support/fuzz/harness.py): never a
5xx of the gateway's own, never a traceback, no money moved by an error answer, every refusal in its
endpoint's error shape (Google's on the Gemini API), the audit history projection keeping up; and a
served one charged exactly once (a file upload: never).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st

from tests.support.fuzz.bodies import SPECIAL_NUMBERS, VALUES, _damaged, _hostile_value, _serialised
from tests.support.fuzz.harness import Ledger, Run, exercise, fuzz
from tests.support.fuzz.multipart import Part, forms, png, wav
from tests.support.fuzz.served import charged_once, refused_in_shape
from tests.support.gateway import Gateway
from tests.support.teams import Team

#: path → (a valid body, the fields clients send, values worth trying for them)
JSON_ROUTES: dict[str, tuple[dict[str, Any], list[str], list[Any]]] = {
    "/v1/images/generations": (
        {"model": "fuzz-dalle", "prompt": "a lighthouse", "n": 1, "size": "1024x1024"},
        ["model", "prompt", "n", "size", "quality", "response_format", "style", "user", "stream"],
        ["auto", "hd", "standard", "1792x1024", "256x256", "b64_json", "url", 0, 11, -1, "", "x" * 40_000],
    ),
    "/v1/audio/speech": (
        {"model": "fuzz-tts", "input": "Hello there.", "voice": "alloy"},
        ["model", "input", "voice", "response_format", "speed", "instructions", "stream_format"],
        ["mp3", "wav", "pcm", "sse", 0.25, 4.0, 100, "", "x" * 5_000, "网络", "\u0000"],
    ),
}

_GEMINI: tuple[dict[str, Any], list[str], list[Any]] = (
    {"contents": [{"role": "user", "parts": [{"text": "hello"}]}], "generationConfig": {"maxOutputTokens": 64}},
    ["contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings", "cachedContent"],
    [
        [{"role": "model", "parts": [{"functionCall": {"name": "x", "args": {}}}]}],
        [{"parts": [{"inlineData": {"mimeType": "image/png", "data": "!!"}}]}],
        [{"functionDeclarations": [{"name": "\u0000", "parameters": {"type": "object"}}]}],
        {"maxOutputTokens": -1, "candidateCount": 2, "thinkingConfig": {"thinkingBudget": 10**12}},
        {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["网络"]}},
        {"parts": [{"text": "evil\u0000user"}]},
        "",
        "x" * 40_000,
    ],
)
JSON_ROUTES["/v1beta/models/fake-claude:generateContent"] = _GEMINI
JSON_ROUTES["/v1beta/models/agent-gemini:streamGenerateContent"] = _GEMINI

#: path → the valid form
FORM_ROUTES: dict[str, list[Part]] = {
    "/v1/audio/transcriptions": [
        Part(b"model", b"fuzz-whisper"),
        Part(b"file", wav(1.5), b"speech.wav", b"audio/wav"),
        Part(b"response_format", b"json"),
    ],
    "/v1/audio/translations": [Part(b"model", b"fuzz-whisper"), Part(b"file", wav(0.5), b"speech.wav", b"audio/wav")],
    "/v1/images/edits": [
        Part(b"model", b"fuzz-dalle-2"),
        Part(b"prompt", b"add a hat"),
        Part(b"image", png(), b"a.png", b"image/png"),
        Part(b"size", b"256x256"),
    ],
    "/v1/files": [
        Part(b"purpose", b"batch"),
        Part(
            b"file",
            b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", '
            b'"body": {"model": "fake-gpt", "messages": [{"role": "user", "content": "hi"}]}}\n',
            b"input.jsonl",
            b"application/jsonl",
        ),
    ],
}


@st.composite
def json_bodies(draw: st.DrawFn, path: str) -> bytes:
    """A body of ``path``'s JSON endpoint: valid, then bent a few times, then perhaps damaged."""
    valid, fields, values = JSON_ROUTES[path]
    body = dict(valid)
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["known", "known", "set", "unknown", "drop"]))
        if action == "known":
            body[draw(st.sampled_from(fields))] = draw(st.one_of(st.sampled_from(values), SPECIAL_NUMBERS, VALUES))
        elif action == "set":
            body[draw(st.sampled_from(fields))] = _hostile_value(draw)
        elif action == "unknown":
            body[draw(st.text(min_size=1, max_size=12))] = _hostile_value(draw)
        elif body:
            body.pop(draw(st.sampled_from(sorted(body))))
    return _damaged(draw, _serialised(body))


def _served_once(run: Run, ledger: Ledger, sent: Any, path: str, example: bytes) -> None:
    if sent is None:
        return
    if not 200 <= sent.response.status_code < 300:
        refused_in_shape(run, sent.response, path, example)
        return
    charged_once(run, ledger, sent.before, sent.response, path, example, required=path != "/v1/files")


@pytest.mark.parametrize("path", sorted(JSON_ROUTES))
def test_no_generated_json_body_breaks_the_gateway_or_moves_money_when_refused(
    fuzz_gateway: Gateway, fuzz_team: Team, ledger: Ledger, run: Run, path: str
):
    headers = {"authorization": f"Bearer {fuzz_team.key}", "content-type": "application/json"}

    def one(body: bytes) -> None:
        _served_once(run, ledger, exercise(run, ledger, path, fuzz_gateway.root_url + path, headers, body), path, body)

    fuzz(one, body=json_bodies(path))
    run.check()


@pytest.mark.parametrize("path", sorted(FORM_ROUTES))
def test_no_generated_upload_breaks_the_gateway_or_moves_money_when_refused(
    fuzz_gateway: Gateway, fuzz_team: Team, ledger: Ledger, run: Run, path: str
):
    def one(form: Any) -> None:
        headers = {"authorization": f"Bearer {fuzz_team.key}", "content-type": form.content_type}
        sent = exercise(run, ledger, path, fuzz_gateway.root_url + path, headers, form.body)
        _served_once(run, ledger, sent, path, form.body[:2000])

    fuzz(one, form=forms(FORM_ROUTES[path]))
    run.check()
