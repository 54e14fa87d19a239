"""The Gemini API side of the fake upstream: Google's Generative Language API at
``POST /v1beta/models/{model}:generateContent``, ``:streamGenerateContent?alt=sse`` and ``:countTokens``
and ``GET /v1beta/models`` (on ``FakeUpstream.anthropic_base_url``, the root without ``/v1``).

The key must come as ``x-goog-api-key`` (or ``?key=``) and be the fake's; Google's error shape
(``{"error": {"code", "message", "status"}}``) answers anything else. A body with a field Google
does not know (``model``, ``stream``: what a careless gateway would leave in) is a 400, as Google's is.
The answer echoes the last user text like the other fakes (``Echo: …``; a function response as
``Echo: tool result: …``), with the same ``[[directive]]`` markers (``fail``, ``tool``, ``cached``,
``think``), and counts tokens with the fakes' one tokenizer. A stream sends one chunk per token, each
with the usage so far, the last with the finish reason. ``google.genai.Client`` reads all of it
(tests/e2e/test_fake_gemini.py).
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from tests.support.fake_upstream import (
    Receive,
    Send,
    _parse_directives,
    _Reject,
    _send_json,
    tokens,
)

_PATH = re.compile(r"^/v1beta/models/(?P<model>[^:/]+):(?P<method>generateContent|streamGenerateContent|countTokens)$")
_FIELDS = frozenset(
    {
        "contents",
        "systemInstruction",
        "tools",
        "toolConfig",
        "generationConfig",
        "safetySettings",
        "cachedContent",
        "labels",
    }
)
_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"}
_STATUS |= {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


class GeminiRefusal(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "status": _STATUS.get(self.code, "UNKNOWN")}}


def _text_of(content: dict[str, Any]) -> str:
    return "".join(str(p.get("text", "")) for p in content.get("parts", []) if isinstance(p, dict) and "text" in p)


def _last_user(contents: list[dict[str, Any]]) -> tuple[str, bool]:
    """The last user turn's text, or its function response's output (and whether it was one)."""
    for content in reversed(contents):
        if content.get("role", "user") != "user":
            continue
        for part in content.get("parts", []):
            if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
                response = part["functionResponse"].get("response") or {}
                output = response.get("output", response.get("content", response))
                return (output if isinstance(output, str) else json.dumps(output)), True
        return _text_of(content), False
    return "", False


def _prompt_tokens(body: dict[str, Any]) -> int:
    texts = [_text_of(c) for c in body.get("contents", []) if isinstance(c, dict)]
    system = body.get("systemInstruction")
    if isinstance(system, dict):
        texts.append(_text_of(system))
    return max(1, sum(len(tokens(t)) for t in texts))


def _declared(body: dict[str, Any]) -> set[str]:
    return {
        str(f.get("name"))
        for tool in body.get("tools") or []
        if isinstance(tool, dict)
        for f in tool.get("functionDeclarations") or []
        if isinstance(f, dict)
    }


class _Answer:
    """What the fake model says to one request: its parts, their token counts and usage."""

    def __init__(self, model: str, body: dict[str, Any]) -> None:
        text, answered_tool = _last_user(body.get("contents") or [])
        try:
            clean, self.d = _parse_directives(text)
        except _Reject:
            raise GeminiRefusal(400, "bad directive") from None
        self.model = model
        self.prompt = _prompt_tokens(body)
        reply = f"Echo: tool result: {clean}" if answered_tool else f"Echo: {clean}"
        self.words = tokens(reply)
        self.call: dict[str, Any] | None = None
        if self.d.tool and not answered_tool and self.d.tool in _declared(body):
            self.words = tokens(f"Calling {self.d.tool}.")
            self.call = {"id": f"fc_{len(body.get('contents') or [])}", "name": self.d.tool}
            self.call["args"] = self.d.tool_args or {"echo": clean}
        self.thoughts = len(tokens(reply)) if self.d.think else 0

    def usage(self, output: int, final: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {"promptTokenCount": self.prompt, "candidatesTokenCount": output}
        if self.d.cached:
            meta["cachedContentTokenCount"] = min(self.d.cached, self.prompt)
        if self.thoughts and final:
            meta["thoughtsTokenCount"] = self.thoughts
        meta["totalTokenCount"] = self.prompt + output + (self.thoughts if final else 0)
        return meta

    def chunk(self, parts: list[dict[str, Any]], output: int, final: bool) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if final:
            candidate["finishReason"] = "STOP"
        return {
            "candidates": [candidate],
            "usageMetadata": self.usage(output, final),
            "modelVersion": self.model,
            "responseId": "fake-gemini-response",
        }

    def whole(self) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        if self.thoughts:
            parts.append({"text": "Thinking about it.", "thought": True})
        parts.append({"text": "".join(self.words)})
        if self.call is not None:
            parts.append({"functionCall": self.call})
        return self.chunk(parts, len(self.words), True)

    def chunks(self) -> list[dict[str, Any]]:
        out = [self.chunk([{"text": w}], i + 1, False) for i, w in enumerate(self.words)]
        tail = [{"functionCall": self.call}] if self.call is not None else []
        return [*out, self.chunk(tail, len(self.words), True)]


def _request(raw: bytes) -> dict[str, Any]:
    try:
        body = msgspec.json.decode(raw) if raw else {}
    except msgspec.DecodeError:
        raise GeminiRefusal(400, "Invalid JSON payload received.") from None
    if not isinstance(body, dict):
        raise GeminiRefusal(400, "Invalid JSON payload received.")
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise GeminiRefusal(400, f'Invalid JSON payload received. Unknown name "{unknown[0]}": Cannot find field.')
    if not isinstance(body.get("contents"), list):
        raise GeminiRefusal(400, "* GenerateContentRequest.contents: contents is not specified")
    return body


async def handle_gemini(
    api_key: str | None, scope: dict[str, Any], raw: bytes, headers: dict[str, str], send: Send, receive: Receive
) -> None:
    """Serve one request to the Gemini API's paths (the key checked first)."""
    route = _PATH.match(scope["path"])
    query = scope["query_string"].decode("latin-1")
    given = headers.get("x-goog-api-key") or dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("key")
    if scope["method"] == "GET" and scope["path"] == "/v1beta/models":
        return await _send_json(send, 200, {"models": [{"name": "models/gemini-x", "displayName": "Gemini X"}]})
    if api_key is not None and given != api_key:
        refusal = GeminiRefusal(400 if not given else 403, "API key not valid. Please pass a valid API key.")
        return await _send_json(send, refusal.code, refusal.body())
    if scope["method"] != "POST" or route is None:
        return await _send_json(send, 404, GeminiRefusal(404, f"Method not found: {scope['path']}").body())
    await answer_gemini(route["model"], route["method"], raw, query, send)


async def answer_gemini(model: str, method: str, raw: bytes, query: str, send: Send) -> None:
    """Answer one authenticated ``generateContent``, ``streamGenerateContent`` or ``countTokens``
    (also Vertex AI's, ``tests/support/fake_vertex.py``)."""
    try:
        body = _request(raw)
        if method == "countTokens":
            return await _send_json(send, 200, {"totalTokens": _prompt_tokens(body)})
        answer = _Answer(model, body)
        if answer.d.fail:
            raise GeminiRefusal(answer.d.fail, f"The fake was told to fail with {answer.d.fail}.")
    except GeminiRefusal as refusal:
        return await _send_json(send, refusal.code, refusal.body())
    if method == "generateContent":
        return await _send_json(send, 200, answer.whole())
    if "alt=sse" not in query:
        return await _send_json(send, 200, answer.chunks())
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    for chunk in answer.chunks():
        frame = b"data: " + msgspec.json.encode(chunk) + b"\r\n\r\n"
        await send({"type": "http.response.body", "body": frame, "more_body": True})
    await send({"type": "http.response.body", "body": b""})
