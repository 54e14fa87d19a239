"""A protocol-faithful fake OpenAI-compatible chat-completions provider.

Why a real HTTP server instead of mocking httpx: the gateway's job is to speak
HTTP to an upstream (auth headers, SSE framing, status codes, broken
connections).  Mock transports skip exactly the parts that break in
production, so the fake listens on a loopback port and speaks the wire format
byte for byte as OpenAI does.  It is a raw ASGI app (no framework, so nothing
normalises or hides the framing) served by uvicorn in a daemon thread, which
keeps it usable from both sync and async tests.

Behaviour is deterministic and driven by the request itself: the reply echoes
the last user message, token counts come from a whitespace tokenizer, and
``[[directive]]`` markers in the user text inject failures, latency, dropped
connections, cached tokens, missing usage, or tool calls.

Run standalone with ``python -m tests.fake_upstream --port 9100``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Awaitable, Callable

import msgspec
import uvicorn

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MODELS = {"object": "list", "data": [{"id": "gpt-x", "object": "model", "created": 1700000000, "owned_by": "fake"}]}
_DIRECTIVE = re.compile(r"\[\[(fail|latency|drop-after|cached|tool):([^\]]*)\]\]|\[\[(no-usage)\]\]")
_INT_DIRECTIVES = {"fail": "fail", "latency": "latency_ms", "drop-after": "drop_after", "cached": "cached"}
_TOKEN = re.compile(r"\S+\s*")


def tokens(text: str) -> list[str]:
    """Deterministic tokenizer; the pieces concatenate back to the text (minus leading space)."""
    return _TOKEN.findall(text)


def message_text(message: dict[str, Any]) -> str:
    """Text of a message: string content, or the joined ``text`` parts of a content list."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def error_body(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error envelope; SDKs read ``error.message``/``type``/``code`` from it."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


class _Reject(Exception):
    """Short-circuits request handling with an error response."""

    def __init__(self, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None):
        super().__init__(status)
        self.status, self.body, self.headers = status, body, headers or []


class _Drop(Exception):
    """Fallback way to break a connection: uvicorn aborts the socket on an app exception."""


@dataclass
class RecordedRequest:
    """One request as the fake saw it, so tests can assert what the gateway sent."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class _Directives:
    """Test-control markers found in the last user message."""

    fail: int | None = None
    latency_ms: int = 0
    drop_after: int | None = None
    cached: int = 0
    tool: str | None = None
    no_usage: bool = False


def _parse_directives(text: str) -> tuple[str, _Directives]:
    """Strip ``[[...]]`` directives from ``text``; returns (clean text, directives)."""
    d = _Directives()
    for m in _DIRECTIVE.finditer(text):
        name, value = m.group(1) or m.group(3), m.group(2)
        if name == "no-usage":
            d.no_usage = True
        elif name == "tool":
            d.tool = value
        elif not value.isdigit():
            raise _Reject(400, error_body(f"bad directive {m.group(0)}", "invalid_request_error"))
        else:
            setattr(d, _INT_DIRECTIVES[name], int(value))
    return _DIRECTIVE.sub("", text).strip(), d


class FakeUpstream:
    """Fake OpenAI upstream on a loopback port; use as a context manager or start()/stop()."""

    def __init__(self, api_key: str | None = "upstream-secret", host: str = "127.0.0.1", port: int = 0) -> None:
        self.api_key = api_key
        self.host = host
        self.port = port
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # ----------------------------------------------------------------- lifecycle
    def _build(self, log_config: Any = None) -> tuple[uvicorn.Server, socket.socket]:
        """Bind the socket ourselves (port 0 = kernel picks) so the port is known before serving: no race."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self, loop="asyncio", http="h11", ws="none", lifespan="off", log_level="warning",
            access_log=False, log_config=log_config, timeout_graceful_shutdown=2,
        )
        return uvicorn.Server(config), sock

    def start(self) -> FakeUpstream:
        """Serve in a daemon thread and block until uvicorn reports it is accepting connections."""
        # log_config=None: don't let uvicorn dictConfig() the test process's logging.
        self._server, self._sock = self._build(log_config=None)
        server, sock = self._server, self._sock
        self._thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                                        name=f"fake-upstream-{self.port}")
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("fake upstream failed to start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Ask uvicorn to exit and join the thread; open streams get a bounded grace period."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._sock is not None:
            self._sock.close()
        self._server = self._thread = self._sock = None

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # ----------------------------------------------------------------- ASGI app
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body"):
                break
        raw = b"".join(chunks)
        try:
            body: Any = msgspec.json.decode(raw) if raw else None
        except msgspec.DecodeError:
            body = None
        headers: dict[str, str] = {}
        for k, v in scope["headers"]:
            name = k.decode("latin-1").lower()
            headers[name] = f"{headers[name]}, {v.decode('latin-1')}" if name in headers else v.decode("latin-1")
        method, path = scope["method"], scope["path"]
        with self._lock:  # record before responding, failures included
            self.requests.append(RecordedRequest(method, path, headers, body))
        try:
            if method == "GET" and path == "/v1/models":
                await _send_json(send, 200, MODELS)
            elif method == "POST" and path == "/v1/chat/completions":
                await self._chat(raw, headers, receive, send)
            else:
                await _send_json(send, 404, error_body("Unknown path", "invalid_request_error"))
        except _Reject as r:
            await _send_json(send, r.status, r.body, r.headers)

    async def _chat(self, raw: bytes, headers: dict[str, str], receive: Receive, send: Send) -> None:
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            raise _Reject(401, error_body("Incorrect API key provided", "invalid_request_error", "invalid_api_key"))
        try:
            req = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            raise _Reject(400, error_body("We could not parse the JSON body of your request.",
                                          "invalid_request_error")) from None
        if not isinstance(req, dict) or not isinstance(req.get("model"), str):
            raise _Reject(400, error_body("you must provide a model parameter", "invalid_request_error"))
        messages = req.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise _Reject(400, error_body("'messages' must be a non-empty array of objects", "invalid_request_error"))

        user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
        text, d = _parse_directives(message_text(user) if user else "")
        if d.latency_ms:
            await asyncio.sleep(d.latency_ms / 1000)
        if d.fail is not None:
            type_ = ("server_error" if d.fail >= 500 else
                     "rate_limit_error" if d.fail == 429 else "invalid_request_error")
            extra = [(b"retry-after", b"1")] if d.fail == 429 else []
            raise _Reject(d.fail, error_body(f"fake upstream failure {d.fail}", type_), extra)

        prompt_tokens = sum(len(tokens(message_text(m))) + 3 for m in messages)
        tool_call: dict[str, Any] | None = None
        pieces: list[str] = []
        finish = "stop"
        if d.tool is not None and req.get("tools"):
            args = msgspec.json.encode({"echo": text}).decode()
            tool_call = {"id": "call_" + secrets.token_hex(4), "type": "function",
                         "function": {"name": d.tool, "arguments": args}}
            completion_tokens, finish = len(tokens(args)) + 3, "tool_calls"
        else:
            pieces = tokens("Echo: " + text)
            limit = req.get("max_completion_tokens")
            limit = req.get("max_tokens") if limit is None else limit
            if isinstance(limit, int) and len(pieces) > limit:
                pieces, finish = pieces[:limit], "length"
            completion_tokens = len(pieces)
        usage = None if d.no_usage else {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": d.cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
        }
        head = {"id": "chatcmpl-" + secrets.token_hex(12), "created": int(time.time()), "model": req["model"],
                "system_fingerprint": "fp_fake"}

        if req.get("stream") is not True:
            if d.drop_after is not None:
                return await _drop(send, receive)
            message: dict[str, Any] = {"role": "assistant", "content": None if tool_call else "".join(pieces),
                                       "refusal": None}
            if tool_call:
                message["tool_calls"] = [tool_call]
            out = {"id": head["id"], "object": "chat.completion", **{k: head[k] for k in ("created", "model")},
                   "system_fingerprint": "fp_fake",
                   "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}]}
            if usage is not None:
                out["usage"] = usage
            return await _send_json(send, 200, out)

        opts = req.get("stream_options")
        include_usage = isinstance(opts, dict) and opts.get("include_usage") is True

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            c = {"id": head["id"], "object": "chat.completion.chunk", "created": head["created"],
                 "model": head["model"], "system_fingerprint": "fp_fake",
                 "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}
            if include_usage:
                c["usage"] = None
            return c

        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        await _sse(send, chunk({"role": "assistant", "content": None if tool_call else "", "refusal": None}))
        if tool_call:
            args = tool_call["function"]["arguments"]
            size = max(1, -(-len(args) // 3))
            deltas = [{"index": 0, "id": tool_call["id"], "type": "function",
                       "function": {"name": d.tool, "arguments": ""}}]
            deltas += [{"index": 0, "function": {"arguments": args[i:i + size]}} for i in range(0, len(args), size)]
            bodies = [{"tool_calls": [td]} for td in deltas]
        else:
            bodies = [{"content": p} for p in pieces]
        for i, delta in enumerate(bodies):
            if d.drop_after is not None and i >= d.drop_after:
                return await _drop(send, receive)
            await _sse(send, chunk(delta))
        if d.drop_after is not None:
            return await _drop(send, receive)
        await _sse(send, chunk({}, finish))
        if include_usage and usage is not None:
            await _sse(send, {**chunk({}), "choices": [], "usage": usage})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _send_json(send: Send, status: int, body: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    data = msgspec.json.encode(body)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": data, "more_body": False})


async def _sse(send: Send, payload: dict[str, Any]) -> None:
    """One SSE frame per ASGI message, so the client really sees an incremental stream."""
    await send({"type": "http.response.body", "body": b"data: " + msgspec.json.encode(payload) + b"\n\n",
                "more_body": True})


async def _drop(send: Send, receive: Receive) -> None:
    """Break the TCP connection mid-response, the way a crashing upstream does.

    uvicorn turns an app exception into a 500 when no response has started, which
    is not a dropped connection; so close uvicorn's transport (reachable through
    the bound ``send``) directly, flushing what was already sent, and wait for
    the disconnect so uvicorn doesn't log an incomplete response.  If that
    internal is ever missing, fall back to raising (uvicorn then closes).
    """
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None or not hasattr(transport, "close"):
        raise _Drop("fake upstream dropped the connection")
    transport.close()
    try:
        while (await asyncio.wait_for(receive(), 2.0))["type"] != "http.disconnect":
            pass
    except asyncio.TimeoutError:
        raise _Drop("fake upstream dropped the connection") from None


def main(argv: list[str] | None = None) -> None:
    """Serve in the foreground (Ctrl-C to stop) for manual poking with curl or the gateway."""
    p = argparse.ArgumentParser(description="Fake OpenAI-compatible upstream")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9100)
    p.add_argument("--api-key", default="upstream-secret", help="required bearer key ('' disables auth)")
    a = p.parse_args(argv)
    fake = FakeUpstream(api_key=a.api_key or None, host=a.host, port=a.port)
    server, sock = fake._build(log_config=uvicorn.config.LOGGING_CONFIG)
    print(f"fake upstream listening on {fake.base_url}", flush=True)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn re-raises the captured signal after a graceful shutdown
        pass


if __name__ == "__main__":
    main()
