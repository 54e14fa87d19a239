"""A fake LLM provider fast enough never to be the bottleneck of the gateway benchmark.

Every answer is rendered once, at start, to the exact bytes sent: an OpenAI chat completion (with
``usage``), a 20-chunk OpenAI stream (final usage chunk and ``[DONE]``: the gateway always asks for
``stream_options.include_usage``), an Anthropic message and its stream (``message_start`` …
``message_stop``, with usage), the same message and stream as Bedrock's InvokeModel answers them
(the stream in AWS's event-stream frames), a Gemini ``generateContent`` answer, an embeddings answer
of 100 vectors × 1,536 floats, and
``/v1/models``. Serving a request is parsing it with httptools
and one ``transport.write``: a raw ``asyncio.Protocol`` on uvloop, no framework, so that one core
answers well over 10,000 requests/s (the benchmark measures and prints that rate on every run).

Streams go out as HTTP/1.1 chunked bodies, one chunk per SSE event, as real providers send them,
all in one write (the generation itself is instant here; the gateway's cost per chunk is what is
measured). The request body is not validated: whether it asks for a stream is all that is read.

    python -m scripts.bench.fast_upstream --port 9100
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import json
import random
import re
import signal
import socket
import struct
from typing import cast

import httptools
import uvloop

from scripts.bench.cases import EMBEDDING_DIMENSIONS, EMBEDDING_INPUTS

WORDS = [f" word{i}" for i in range(20)]  # the 20 streamed chunks, one token each
TEXT = "".join(WORDS)
PROMPT_TOKENS, COMPLETION_TOKENS = 12, len(WORDS)
_STREAM = re.compile(rb'"stream"\s*:\s*true')


def _response(status: str, content_type: str, body: bytes) -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n"
        "connection: keep-alive\r\n\r\n"
    ).encode() + body


def _sse_response(events: list[bytes]) -> bytes:
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"transfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n"
    )
    return head + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


def _json(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def chat_completion() -> bytes:
    usage = {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": COMPLETION_TOKENS,
        "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
    }
    return _response(
        "200 OK",
        "application/json",
        _json(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": "gpt-x",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": TEXT},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage,
                "system_fingerprint": "fp_bench",
            }
        ),
    )


def chat_stream() -> bytes:
    def chunk(delta: dict[str, object], finish: str | None = None, choices: bool = True, **extra: object) -> bytes:
        body = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "gpt-x",
            "system_fingerprint": "fp_bench",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}] if choices else [],
            **extra,
        }
        return b"data: " + _json(body) + b"\n\n"

    events = [
        chunk({"role": "assistant", "content": WORDS[0]} if i == 0 else {"content": w}, usage=None)
        for i, w in enumerate(WORDS)
    ]
    events.append(chunk({}, "stop", usage=None))
    events.append(
        chunk(
            {},
            choices=False,
            usage={
                "prompt_tokens": PROMPT_TOKENS,
                "completion_tokens": COMPLETION_TOKENS,
                "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
            },
        )
    )
    events.append(b"data: [DONE]\n\n")
    return _sse_response(events)


def anthropic_message() -> bytes:
    return _response(
        "200 OK",
        "application/json",
        _json(
            {
                "id": "msg_bench",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [{"type": "text", "text": TEXT}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": COMPLETION_TOKENS},
            }
        ),
    )


def anthropic_events() -> list[dict[str, object]]:
    """The Messages stream's events, ``message_start`` to ``message_stop``, with usage."""
    start: dict[str, object] = {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": 1},
    }
    return [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}} for w in WORDS),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": COMPLETION_TOKENS},
        },
        {"type": "message_stop"},
    ]


def anthropic_stream() -> bytes:
    return _sse_response(
        [b"event: " + str(e["type"]).encode() + b"\ndata: " + _json(e) + b"\n\n" for e in anthropic_events()]
    )


def _event_stream_frame(payload: bytes) -> bytes:
    """One AWS event-stream message of a Bedrock response stream: its string headers (type 7), the
    payload, and the prelude's and the message's CRC32s."""
    headers = b"".join(
        struct.pack("B", len(name)) + name + b"\x07" + struct.pack(">H", len(value)) + value
        for name, value in (
            (b":event-type", b"chunk"),
            (b":content-type", b"application/json"),
            (b":message-type", b"event"),
        )
    )
    prelude = struct.pack(">II", 16 + len(headers) + len(payload), len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    message = prelude + headers + payload
    return message + struct.pack(">I", binascii.crc32(message))


def bedrock_stream() -> bytes:
    """InvokeModelWithResponseStream's answer: each Messages event base64-encoded in a ``chunk``
    frame, one HTTP chunk per frame, as Bedrock sends them."""
    frames = [_event_stream_frame(_json({"bytes": base64.b64encode(_json(e)).decode()})) for e in anthropic_events()]
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/vnd.amazon.eventstream\r\n"
        b"transfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n"
    )
    return head + b"".join(b"%x\r\n%s\r\n" % (len(f), f) for f in frames) + b"0\r\n\r\n"


def embeddings() -> bytes:
    """OpenAI's embeddings answer for the benchmark's 100 inputs: floats written as OpenAI writes
    them (about ten significant digits, e.g. -0.0069292835)."""
    rng = random.Random(1536)
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": [float(f"{rng.gauss(0, 0.03):.10f}") for _ in range(EMBEDDING_DIMENSIONS)],
        }
        for i in range(EMBEDDING_INPUTS)
    ]
    tokens = EMBEDDING_INPUTS * 16
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return _response(
        "200 OK",
        "application/json",
        _json({"object": "list", "data": data, "model": "text-embedding-x", "usage": usage}),
    )


def models() -> bytes:
    return _response(
        "200 OK",
        "application/json",
        _json(
            {
                "object": "list",
                "data": [
                    {"id": "gpt-x", "object": "model", "created": 1_700_000_000, "owned_by": "bench"},
                    {"id": "claude-x", "object": "model", "created": 1_700_000_000, "owned_by": "bench"},
                ],
            }
        ),
    )


#: path → (plain answer, streamed answer)
ANSWERS: dict[bytes, tuple[bytes, bytes]] = {
    b"/v1/chat/completions": (chat_completion(), chat_stream()),
    b"/v1/messages": (anthropic_message(), anthropic_stream()),
    b"/v1/models": (models(), models()),
    b"/v1/embeddings": (embeddings(), embeddings()),
}


def gemini_answer() -> bytes:
    """A Gemini ``generateContent`` answer, with ``usageMetadata``."""
    usage = {
        "promptTokenCount": PROMPT_TOKENS,
        "candidatesTokenCount": COMPLETION_TOKENS,
        "totalTokenCount": PROMPT_TOKENS + COMPLETION_TOKENS,
    }
    candidate = {"content": {"role": "model", "parts": [{"text": TEXT}]}, "finishReason": "STOP", "index": 0}
    body = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-x", "responseId": "bench"}
    return _response("200 OK", "application/json", _json(body))


#: Bedrock's InvokeModel paths (``/model/{id}/invoke``, ``…/invoke-with-response-stream``), by their last segment.
BEDROCK_ANSWERS: dict[bytes, bytes] = {b"invoke": anthropic_message(), b"invoke-with-response-stream": bedrock_stream()}
GEMINI = gemini_answer()
NOT_FOUND = _response("404 Not Found", "application/json", b'{"error":{"message":"not found","type":"not_found"}}')


class FastUpstream(asyncio.Protocol):
    """One keep-alive connection: parse with httptools, answer each request with its pre-rendered bytes."""

    __slots__ = ("body", "parser", "transport", "url")

    def __init__(self) -> None:
        self.transport: asyncio.Transport  # set by connection_made, before any data arrives
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.body: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream server's transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.url, self.body = b"", []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        path = self.url.split(b"?", 1)[0]
        if path.startswith(b"/v1beta/models/"):
            self.transport.write(GEMINI if path.endswith(b":generateContent") else NOT_FOUND)
            return
        if path.startswith(b"/model/"):
            self.transport.write(BEDROCK_ANSWERS.get(path.rsplit(b"/", 1)[-1], NOT_FOUND))
            return
        answers = ANSWERS.get(path)
        if answers is None:
            self.transport.write(NOT_FOUND)
            return
        streamed = bool(self.body) and _STREAM.search(b"".join(self.body)) is not None
        self.transport.write(answers[1] if streamed else answers[0])


async def serve(host: str, port: int, ready: str | None = None) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(FastUpstream, host, port, backlog=1024, reuse_address=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(ready or f"fast upstream on http://{host}:{port}", flush=True)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    args = parser.parse_args(argv)
    uvloop.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
