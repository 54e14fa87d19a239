"""The upstream's answers, canned: the bytes the benchmark's fast upstream sends for a chat completion and
an Anthropic message, whole and streamed, and the response object the adapters read them from (what they
use of aiohttp's), so the measured path runs without a socket. ``CASES`` names each measured request."""

from __future__ import annotations

import asyncio
import json
from typing import Any

WORDS = [f" word{i}" for i in range(20)]
PROMPT = [
    {"role": "system", "content": "You are a helpful assistant. Answer in one short sentence."},
    {"role": "user", "content": "Why do toll roads keep a ledger of every car that passes through?"},
]


def json_bytes(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def chat_answer() -> bytes:
    return json_bytes(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "gpt-x",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "".join(WORDS)},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 20, "total_tokens": 32},
            "system_fingerprint": "fp_bench",
        }
    )


def chat_frames() -> list[bytes]:
    def chunk(delta: dict[str, object], finish: str | None = None, **extra: object) -> bytes:
        return (
            b"data: "
            + json_bytes(
                {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion.chunk",
                    "created": 1_700_000_000,
                    "model": "gpt-x",
                    "system_fingerprint": "fp_bench",
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                    **extra,
                }
            )
            + b"\n\n"
        )

    frames = [
        chunk({"role": "assistant", "content": w} if i == 0 else {"content": w}, usage=None)
        for i, w in enumerate(WORDS)
    ]
    frames.append(chunk({}, "stop", usage=None))
    frames.append(
        b"data: "
        + json_bytes(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": "gpt-x",
                "system_fingerprint": "fp_bench",
                "choices": [],
                "usage": {"prompt_tokens": 12, "completion_tokens": 20, "total_tokens": 32},
            }
        )
        + b"\n\n"
    )
    return [*frames, b"data: [DONE]\n\n"]


def message_answer() -> bytes:
    return json_bytes(
        {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [{"type": "text", "text": "".join(WORDS)}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 20},
        }
    )


def message_frames() -> list[bytes]:
    def event(body: dict[str, Any]) -> bytes:
        return b"event: " + str(body["type"]).encode() + b"\ndata: " + json_bytes(body) + b"\n\n"

    return [
        event(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_bench",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-x",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 12, "output_tokens": 1},
                },
            }
        ),
        event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        *(
            event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}})
            for w in WORDS
        ),
        event({"type": "content_block_stop", "index": 0}),
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 20},
            }
        ),
        event({"type": "message_stop"}),
    ]


class _Content:
    """What the adapters use of aiohttp's ``StreamReader``: ``iter_any`` (an iterator object, as
    aiohttp's is), ``read`` and ``at_eof``."""

    def __init__(self, reads: list[bytes], apart: bool) -> None:
        self._reads = iter(reads)
        self._apart = apart
        self._eof = False

    def iter_any(self) -> _Content:
        return self

    def __aiter__(self) -> _Content:
        return self

    async def __anext__(self) -> bytes:
        if self._apart:
            await asyncio.sleep(0)
        for data in self._reads:
            return data
        self._eof = True
        raise StopAsyncIteration

    async def read(self) -> bytes:
        self._eof = True
        return b"".join(self._reads)

    def at_eof(self) -> bool:
        return self._eof


class CannedResponse:
    """What the adapters use of an ``aiohttp.ClientResponse``."""

    def __init__(self, reads: list[bytes], apart: bool) -> None:
        self.status = 200
        self.headers: dict[str, str] = {}
        self.content = _Content(reads, apart)

    async def read(self) -> bytes:
        return await self.content.read()

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


CASES: dict[str, tuple[str, dict[str, Any], list[bytes], bool]] = {
    # name: (path, body, the upstream's reads, frames one per read)
    "chat": (
        "/v1/chat/completions",
        {"model": "bench-gpt", "messages": PROMPT, "max_tokens": 64},
        [chat_answer()],
        False,
    ),
    "chat_stream": (
        "/v1/chat/completions",
        {
            "model": "bench-gpt",
            "messages": PROMPT,
            "max_tokens": 64,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        [b"".join(chat_frames())],
        False,
    ),
    "chat_stream_apart": (
        "/v1/chat/completions",
        {
            "model": "bench-gpt",
            "messages": PROMPT,
            "max_tokens": 64,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        chat_frames(),
        True,
    ),
    "messages": (
        "/v1/messages",
        {"model": "bench-claude", "max_tokens": 64, "messages": PROMPT[1:]},
        [message_answer()],
        False,
    ),
    "messages_stream": (
        "/v1/messages",
        {"model": "bench-claude", "max_tokens": 64, "messages": PROMPT[1:], "stream": True},
        [b"".join(message_frames())],
        False,
    ),
    "messages_stream_apart": (
        "/v1/messages",
        {"model": "bench-claude", "max_tokens": 64, "messages": PROMPT[1:], "stream": True},
        message_frames(),
        True,
    ),
}
