"""CPU per request of the gateway's own request path, in process, against canned upstream answers.

``tollgate bench`` measures whole processes over real sockets, on a shared machine, where a
difference of 0.1 ms per request is within the noise of one run. This tool takes the network and the
HTTP server away: it builds the real application (``create_asgi_app``: the request record, the
deadlines, the fast path, the routes, the billed call, the relay, a real ledger on SQLite) and calls
it as uvicorn would, with the upstream's answers canned in memory — the same bytes as the benchmark's
fast upstream sends, handed to the adapters as aiohttp would — and reports ``time.process_time`` per
request (the ledger's writer thread included) over thousands of requests, alternating the cases in
rounds so that whatever else the machine does hits them alike.

A stream's upstream frames come either all in one read (``burst``: as the benchmark's fast upstream
sends them, and as a loaded gateway finds them) or one per read, with the event loop turning between
reads (``apart``: as a provider generating token by token sends them).

    python -m scripts.relay_cost [--requests 2000] [--rounds 5] [--concurrency 1] [--cases chat,chat_stream]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from litestar.response import Stream

from app.http.prompt_size import model_rules
from app.http.relay import answer
from app.http.server import create_asgi_app
from app.runtime import build_runtime
from app.tokens import Protocol as Wire
from app.tokens.delivered import Delivered
from app.translate.exchange import plan
from app.upstream.client import Timeouts
from domain.settings import parse_settings
from domain.usage import TokenUsage

WORDS = [f" word{i}" for i in range(20)]
PROMPT = [
    {"role": "system", "content": "You are a helpful assistant. Answer in one short sentence."},
    {"role": "user", "content": "Why do toll roads keep a ledger of every car that passes through?"},
]
KEY_ENV = "RELAY_COST_UPSTREAM_KEY"


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def chat_answer() -> bytes:
    return _json(
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
            + _json(
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
        + _json(
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
    return _json(
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
        return b"event: " + str(body["type"]).encode() + b"\ndata: " + _json(body) + b"\n\n"

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

MODEL = """
[[models]]
id = "{id}"
display_name = "{id}"
owned_by = "bench"
context_window = 200000
max_output_tokens = 4096
pricing = {{input = 2.5, output = 10.0, cache_create = 3.125, cache_hit = 1.25}}
upstream = {{kind = "{kind}", base_url = "http://127.0.0.1:9/v1", api_key_env = "{env}", model = "{name}"}}
"""


def _cli(config: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, KEY_ENV: "k"},
    )
    return done.stdout.strip().splitlines()[-1]


def setup(workdir: Path) -> tuple[Path, str]:
    config = workdir / "tollgate.toml"
    config.write_text(
        f'database_url = "sqlite:///{workdir / "ledger.db"}"\ncredits_per_usd = 100\n'
        + MODEL.format(id="bench-gpt", kind="openai", env=KEY_ENV, name="gpt-x")
        + MODEL.format(id="bench-claude", kind="anthropic", env=KEY_ENV, name="claude-x")
    )
    _cli(config, "team", "create", "bench", "--credits", "1000000000")
    key = _cli(config, "key", "create", "--team", "bench", "--rpm", "100000000", "--tpm", "100000000000")
    return config, key


class Driver:
    """The application with its lifespan started, called as uvicorn calls it."""

    def __init__(self, config: Path, key: str) -> None:
        os.environ[KEY_ENV] = "k"
        settings = parse_settings(config.read_text(), str(config))
        self.runtime = build_runtime(settings, config.parent)
        self.app = create_asgi_app(self.runtime)
        self.key = key
        self.case = CASES["chat"]
        self.runtime.http.post = self._post  # type: ignore[method-assign,assignment]
        self._lifespan: asyncio.Task[None] | None = None
        self._started = asyncio.Event()
        self._stop = asyncio.Event()

    async def _post(self, url: str, content: bytes, headers: dict[str, str], timeouts: Timeouts) -> CannedResponse:
        _, _, reads, apart = self.case
        return CannedResponse(reads, apart)

    async def start(self) -> None:
        async def receive() -> dict[str, Any]:
            if not self._started.is_set():
                return {"type": "lifespan.startup"}
            await self._stop.wait()
            return {"type": "lifespan.shutdown"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "lifespan.startup.complete":
                self._started.set()
            elif message["type"].endswith("failed"):
                raise RuntimeError(message)

        self._lifespan = asyncio.create_task(
            self.app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
        )
        await self._started.wait()

    async def stop(self) -> None:
        self._stop.set()
        if self._lifespan is not None:
            await self._lifespan

    async def request(self) -> int:
        path, body, _, _ = self.case
        raw = _json(body)
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"gateway.local"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(raw)).encode()),
                (b"authorization", f"Bearer {self.key}".encode()),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 80),
            "state": {},
        }
        bodies = [{"type": "http.request", "body": raw, "more_body": False}]
        complete = asyncio.Event()
        status = 0

        async def receive() -> dict[str, Any]:
            if bodies:
                return bodies.pop()
            await complete.wait()  # as uvicorn: the client's disconnect, once the answer was sent
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif not message.get("more_body", False):
                complete.set()

        await self.app(scope, receive, send)
        return status


class _Call:
    """What the relay asks of a billed call, without the ledger: the charge is the final frames'
    rendering, with a fixed cost (``--part relay``)."""

    def __init__(self, exchange: Any, upstream: Any, delivered: Delivered) -> None:
        self.exchange = exchange
        self.transcript = None
        self.headers: dict[str, str] = {}
        self.delivered = delivered
        self._upstream = upstream
        self._stream: Any = None

    async def __aenter__(self) -> _Call:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._stream is not None:
            if hasattr(self._stream, "close"):
                self._stream.close()
            else:  # the stream of a version before streams closed at once
                await self._stream.aclose()

    async def complete(self) -> Any:
        return await self._upstream.complete(self.exchange.body, self.exchange.headers)

    async def open_stream(self) -> Any:
        self._stream = await self._upstream.open_stream(self.exchange.body, self.exchange.headers)
        return self._stream

    async def charge(self, usage: TokenUsage, render: Callable[[dict[str, Any]], bytes]) -> bytes:
        return render(_COST)

    async def charge_stream(self, usage: TokenUsage, final: Callable[[dict[str, Any]], list[bytes]]) -> bytes:
        return b"".join(final(_COST))

    async def last_frames(self, frames: bytes) -> bytes:
        from app.http.event_stream import LastChunk  # only a version with last frames asks for them

        return LastChunk(frames)

    async def settle_partial(self, exc: Exception) -> None:
        raise RuntimeError(f"the canned stream failed: {exc}")


_COST = {"cost": {"credits": Decimal("0.000123")}, "remaining": {"credits": Decimal("99.99")}}


class _Request:
    headers: ClassVar[dict[str, str]] = {}


async def relay_once(driver: Driver) -> int:
    """One request through the relay alone (``app/http/relay.py``: plan, call, answer, and the
    streamed answer's ASGI messages), its call billed by nothing."""
    path, body, _, _ = driver.case
    protocol: Wire = "chat" if path == "/v1/chat/completions" else "messages"
    model = driver.runtime.settings.model(body["model"])
    assert model is not None
    upstream = driver.runtime.upstreams[model.id]
    exchange = plan(model, upstream.wire, protocol, dict(body), {}, 20)
    call = _Call(exchange, upstream, Delivered(model_rules(model, upstream.wire), 20))
    response = await answer(call)  # type: ignore[arg-type]
    if not isinstance(response, Stream):
        return 200 if response.content else 0
    complete = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await complete.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            complete.set()

    await response.to_asgi_response(None, _Request())({}, receive, send)  # type: ignore[arg-type]
    return 200


async def measure(driver: Driver, case: str, requests: int, concurrency: int, part: str) -> tuple[float, float]:
    """CPU seconds per request of ``requests`` requests of ``case``, ``concurrency`` at a time: the
    process's, and the event loop's thread's alone."""
    driver.case = CASES[case]
    once = driver.request if part == "request" else partial(relay_once, driver)
    left = requests

    async def loop() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            status = await once()
            if status != 200:
                raise RuntimeError(f"{case}: status {status}")

    await asyncio.gather(*(loop() for _ in range(2)))  # warm
    left = requests
    start, loop_start = time.process_time(), time.thread_time()
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    loop_cpu = time.thread_time() - loop_start
    await asyncio.sleep(0.3)  # the writer's last commits
    return (time.process_time() - start) / requests, loop_cpu / requests


async def run(args: argparse.Namespace) -> None:
    cases = args.cases.split(",")
    with tempfile.TemporaryDirectory(prefix="relay-cost-") as tmp:
        config, key = setup(Path(tmp))
        driver = Driver(config, key)
        await driver.start()
        gc.collect()
        gc.freeze()  # what start-up built is never collected: each round's collections walk what requests make
        try:
            results: dict[str, list[tuple[float, float]]] = {case: [] for case in cases}
            for _ in range(args.rounds):
                for case in cases:
                    results[case].append(await measure(driver, case, args.requests, args.concurrency, args.part))
        finally:
            await driver.stop()
    print(
        f"CPU per request ({args.part}), in process, concurrency {args.concurrency}, {args.requests} requests × "
        f"{args.rounds} rounds: the median and the least of the rounds (the least is the one the machine's "
        f"other work disturbed least), each against {cases[0]}'s; the process's, and the event loop's thread's"
    )
    for which, name in ((0, "process"), (1, "event loop")):
        base = statistics.median(r[which] for r in results[cases[0]])
        least = min(r[which] for r in results[cases[0]])
        for case in cases:
            values = [r[which] for r in results[case]]
            median = statistics.median(values)
            print(
                f"  {name:10} {case:22} median {median * 1e3:6.3f} ms ({median / base:4.2f}×)   "
                f"least {min(values) * 1e3:6.3f} ms ({min(values) / least:4.2f}×)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--cases", default="chat,chat_stream,chat_stream_apart")
    parser.add_argument(
        "--part",
        choices=("request", "relay"),
        default="request",
        help="the whole request (default), or the relay alone: no auth, no prompt count, no "
        "ledger (the answer's cost is fixed), so what changes between runs is the relay's",
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
