"""What the benchmark asks: five requests, each sent as is to the upstream (direct), to the bare
proxy (the floor) and to Tollgate.

The same bytes go to all three, so the only difference is what sits in between. The cross-protocol
case is a chat request for a model behind an Anthropic upstream: Tollgate translates it both ways,
while the floor (which cannot translate) and the direct call send it to the upstream's own chat
endpoint — so its Tollgate/floor ratio is what translation costs on top of everything else. The
embeddings case's answer is large (100 vectors of 1,536 floats): what passing it through costs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

GPT, CLAUDE, EMBEDDING = "bench-gpt", "bench-claude", "bench-embedding"
#: Claude on AWS Bedrock: every request SigV4-signed by botocore, a stream read from AWS's event-stream framing.
BEDROCK = "bench-bedrock"
#: The embeddings case's answer: this many inputs, each a vector of this many floats (OpenAI's
#: text-embedding-3-small): 1,536 × 100 floats, about 2 MB of JSON the gateway must pass through.
EMBEDDING_INPUTS, EMBEDDING_DIMENSIONS = 100, 1536
SYSTEM = "You are a helpful assistant. Answer in one short sentence."
QUESTION = "Why do toll roads keep a ledger of every car that passes through?"


@dataclass(frozen=True)
class Case:
    name: str
    title: str
    path: str
    body: dict[str, object]
    stream: bool = False
    anthropic: bool = False  # sent with Anthropic's headers (x-api-key, anthropic-version)
    gemini: bool = False  # sent with Google's key header (x-goog-api-key)

    def body_bytes(self) -> bytes:
        return json.dumps(self.body, separators=(",", ":")).encode()

    def headers(self, key: str) -> dict[str, str]:
        if self.anthropic:
            return {"x-api-key": key, "anthropic-version": "2023-06-01"}
        if self.gemini:
            return {"x-goog-api-key": key}
        return {"authorization": f"Bearer {key}"}


def _chat(model: str, **extra: object) -> dict[str, object]:
    return {
        "model": model,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
        "max_tokens": 64,
        **extra,
    }


def _messages(model: str, **extra: object) -> dict[str, object]:
    return {
        "model": model,
        "max_tokens": 64,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": QUESTION}],
        **extra,
    }


CASES = {
    case.name: case
    for case in (
        Case("chat", "chat completions → openai", "/v1/chat/completions", _chat(GPT)),
        Case(
            "chat_stream",
            "chat completions, 20-chunk stream → openai",
            "/v1/chat/completions",
            _chat(GPT, stream=True, stream_options={"include_usage": True}),
            stream=True,
        ),
        Case(
            "messages",
            "messages → anthropic",
            "/v1/messages",
            _messages(CLAUDE),
            anthropic=True,
        ),
        Case(
            "messages_stream",
            "messages, 20-event stream → anthropic",
            "/v1/messages",
            _messages(CLAUDE, stream=True),
            stream=True,
            anthropic=True,
        ),
        Case("bedrock", "messages → bedrock (SigV4-signed)", "/v1/messages", _messages(BEDROCK), anthropic=True),
        Case(
            "bedrock_stream",
            "messages, 20-event stream → bedrock (SigV4, event-stream frames)",
            "/v1/messages",
            _messages(BEDROCK, stream=True),
            stream=True,
            anthropic=True,
        ),
        Case("cross", "chat completions → anthropic (translated)", "/v1/chat/completions", _chat(CLAUDE)),
        Case(
            "gemini_cross",
            "gemini generateContent → anthropic (translated)",
            f"/v1beta/models/{CLAUDE}:generateContent",
            {
                "systemInstruction": {"parts": [{"text": SYSTEM}]},
                "contents": [{"role": "user", "parts": [{"text": QUESTION}]}],
                "generationConfig": {"maxOutputTokens": 64},
            },
            gemini=True,
        ),
        Case(
            "embeddings",
            f"embeddings, {EMBEDDING_INPUTS} inputs × {EMBEDDING_DIMENSIONS} floats → openai",
            "/v1/embeddings",
            {
                "model": EMBEDDING,
                "input": [f"{QUESTION} ({i})" for i in range(EMBEDDING_INPUTS)],
                "encoding_format": "float",
            },
        ),
    )
}
