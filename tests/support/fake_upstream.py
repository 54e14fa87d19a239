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
connections, cached/cache-write/reasoning tokens, missing usage, or tool calls.

A directive applies to whoever receives the message; to make one *deployment* of a model fail while
another answers, give it a faulty base URL instead: every request under ``/status/CODE/...`` (e.g.
``http://127.0.0.1:PORT/status/503/v1``) answers CODE in the protocol's error shape, and every
request under ``/hang/...`` is read and then never answered (the caller must time out), and every
request under ``/cut/...`` is answered 200 and cut off in the middle of the body.

The same server is also a fake of the Anthropic Messages API (``POST
/v1/messages`` and ``/v1/messages/count_tokens``, see ``tests/support/fake_anthropic.py``;
point Anthropic clients at ``anthropic_base_url``) and of the OpenAI Responses
API (``POST /v1/responses``, see ``tests/support/fake_responses.py``), embeddings (``POST /v1/embeddings``, see
``tests/support/fake_embeddings.py``), image generation and edits (``tests/support/fake_images.py``),
of AWS Bedrock's InvokeModel for Anthropic models, SigV4 checked (``/model/...``, see
``tests/support/fake_bedrock.py``), of Google's Gemini API (``/v1beta/...``,
``tests/support/fake_gemini.py``), of Google Vertex AI and its token endpoint (``/v1/projects/...``,
``/token``: ``tests/support/fake_vertex.py``),
and of OpenAI's audio endpoints
(``/v1/audio/transcriptions``, ``/translations``, ``/speech``: ``tests/support/fake_audio.py``).

Run standalone with ``python -m tests.support.fake_upstream --port 9100``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import secrets
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import msgspec
import uvicorn

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MODELS = {"object": "list", "data": [{"id": "gpt-x", "object": "model", "created": 1700000000, "owned_by": "fake"}]}
_DIRECTIVE = re.compile(
    r"\[\[(fail|latency|chunk-delay|drop-after|cached|cache-write|reason):([^\]]*)\]\]"
    r"|\[\[(no-usage|think|stream-error)\]\]"
    r"|\[\[gate:(?P<gate>[\w-]+)\]\]"
    r"|\[\[tool:(?P<tool>[^\]\s]+)(?:\s+(?P<args>\{.*?\}))?\]\]",
    re.DOTALL,
)
_INT_DIRECTIVES = {
    "fail": "fail",
    "latency": "latency_ms",
    "chunk-delay": "chunk_delay_ms",
    "drop-after": "drop_after",
    "cached": "cached",
    "cache-write": "cache_write",
    "reason": "reason",
}
_FLAG_DIRECTIVES = {"no-usage": "no_usage", "think": "think", "stream-error": "stream_error"}
_OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
_FAULTY_PREFIX = re.compile(r"^/(?:status/(?P<status>\d{3})|(?P<hang>hang)|(?P<cut>cut))(?P<rest>/.*)$")
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


def chat_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """The prompt tokens the fake reports for a chat request: each message's text tokens + 3."""
    return sum(len(tokens(message_text(m))) + 3 for m in messages)


def error_body(message: str, type_: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error envelope; SDKs read ``error.message``/``type``/``code`` from it."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


class _Reject(Exception):
    """Short-circuits request handling with an error response."""

    def __init__(self, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None):
        super().__init__(status)
        self.status, self.body, self.headers = status, body, headers or []


def _bad(message: str, param: str | None = None) -> _Reject:
    return _Reject(400, error_body(message, "invalid_request_error", param=param))


def openai_failure(status: int, message: str) -> _Reject:
    """OpenAI's own error for ``status``, as its API sends it: a 429 is ``"type": "requests"`` with
    ``"code": "rate_limit_exceeded"`` and a ``retry-after`` (OpenAI's wording, not the gateway's
    ``rate_limit_error``), a 5xx ``server_error``, any other status ``invalid_request_error``."""
    if status == 429:
        return _Reject(429, error_body(message, "requests", "rate_limit_exceeded"), [(b"retry-after", b"1")])
    return _Reject(status, error_body(message, "server_error" if status >= 500 else "invalid_request_error"))


class _Drop(Exception):
    """Fallback way to break a connection: uvicorn aborts the socket on an app exception."""


@dataclass
class RecordedRequest:
    """One request as the fake saw it, so tests can assert what the gateway sent, and how it ended:
    ``completed`` (the whole response went out), ``dropped`` (the fake broke the connection on
    purpose) or ``aborted`` (the caller closed the connection first: a cancelled request)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    completed: bool = False
    dropped: bool = False
    aborted: bool = False
    #: The query string as sent (Azure's ``api-version``).
    query: str = ""
    #: The path as it came on the wire, percent-encoding and all (``path`` is decoded).
    raw_path: str = ""


class _TrackedSend:
    """The ASGI ``send``, noting in the request's record when the response's last byte goes out
    (``__self__`` stays reachable, for ``_drop``)."""

    def __init__(self, send: Send, record: RecordedRequest) -> None:
        self._send = send
        self.record = record
        self.__self__ = getattr(send, "__self__", None)

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self.record.completed = True
        await self._send(message)


async def _watch_for_hang_up(receive: Receive, record: RecordedRequest) -> None:
    """Note a caller that closes the connection before the response is complete."""
    while (await receive())["type"] != "http.disconnect":
        pass
    if not record.completed and not record.dropped:
        record.aborted = True


@dataclass
class _Directives:
    """Test-control markers found in the last user message."""

    fail: int | None = None
    latency_ms: int = 0
    chunk_delay_ms: int = 0  # a pause before every streamed delta, to tell a relay from a buffer
    drop_after: int | None = None
    cached: int = 0
    cache_write: int | None = None
    reason: int = 0
    tool: str | None = None
    #: The tool call's arguments, from ``[[tool:NAME {"json": "object"}]]`` (default: ``{"echo": text}``).
    tool_args: dict[str, Any] | None = None
    no_usage: bool = False
    think: bool = False
    stream_error: bool = False
    #: ``[[gate:NAME]]``: answer only once the test opened the gate NAME (``FakeUpstream.open_gate``), so a
    #: request is provably in flight for as long as the test needs, however slow the machine.
    gate: str | None = None


#: The gates requests wait at, by name; set from the test's thread, read from the fake's event loop.
_GATES: dict[str, threading.Event] = {}
_GATES_LOCK = threading.Lock()
#: A gate nobody opens lets its requests through after this long, so a failed test leaves nothing hanging.
GATE_TIMEOUT = 60.0


def _gate(name: str) -> threading.Event:
    with _GATES_LOCK:
        return _GATES.setdefault(name, threading.Event())


async def before_answering(d: _Directives) -> None:
    """The wait the directives ask for before an answer: a fixed latency, then the gate if one is named."""
    if d.latency_ms:
        await asyncio.sleep(d.latency_ms / 1000)
    if d.gate is not None:
        await asyncio.to_thread(_gate(d.gate).wait, GATE_TIMEOUT)  # set from the test's thread


def _parse_directives(text: str, reject: Callable[[str], _Reject] | None = None) -> tuple[str, _Directives]:
    """Strip ``[[...]]`` directives from ``text``; returns (clean text, directives).

    ``reject`` builds the error for a malformed directive (the Anthropic side passes its own envelope).
    """
    d = _Directives()
    for m in _DIRECTIVE.finditer(text):
        name, value = m.group(1) or m.group(3), m.group(2)
        if m.group("gate"):
            d.gate = m.group("gate")
        elif m.group("tool"):
            d.tool = m.group("tool")
            if m.group("args"):
                try:
                    d.tool_args = msgspec.json.decode(m.group("args"))
                except msgspec.DecodeError:
                    raise (reject or _bad)(f"bad directive {m.group(0)}") from None
        elif name in _FLAG_DIRECTIVES:
            setattr(d, _FLAG_DIRECTIVES[name], True)
        elif not value.isdigit():
            raise (reject or _bad)(f"bad directive {m.group(0)}")
        else:
            setattr(d, _INT_DIRECTIVES[name], int(value))
    return _DIRECTIVE.sub("", text).strip(), d


def cut_at_stop(text: str, stops: list[str]) -> tuple[str, str | None]:
    """Cut ``text`` before the earliest occurrence of any stop string; returns (text, the stop that matched)."""
    hits = [(i, s) for s in stops if s and (i := text.find(s)) >= 0]
    if not hits:
        return text, None
    i, stop = min(hits, key=lambda h: h[0])
    return text[:i], stop


class FakeUpstream:
    """Fake OpenAI (and Anthropic) upstream on a loopback port; use as a context manager or start()/stop()."""

    def __init__(self, api_key: str | None = "upstream-secret", host: str = "127.0.0.1", port: int = 0) -> None:
        self.api_key = api_key
        self.host = host
        self.port = port
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        from tests.support.fake_batches import BatchState  # lazy: fake_batches imports this module

        #: The Files and Batch APIs' state (``tests/support/fake_batches.py``): how its batches end.
        self.batches = BatchState()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Anthropic clients append ``/v1/messages`` themselves, so no ``/v1`` here."""
        return f"http://{self.host}:{self.port}"

    # ----------------------------------------------------------------- lifecycle
    def _build(self, log_config: Any = None) -> tuple[uvicorn.Server, socket.socket]:
        """Bind the socket ourselves (port 0 = kernel picks) so the port is known before serving: no race."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self,
            loop="asyncio",
            http="h11",
            ws="none",
            lifespan="off",
            log_level="warning",
            access_log=False,
            log_config=log_config,
            timeout_graceful_shutdown=2,
        )
        return uvicorn.Server(config), sock

    def start(self) -> FakeUpstream:
        """Serve in a daemon thread and block until uvicorn reports it is accepting connections."""
        # log_config=None: don't let uvicorn dictConfig() the test process's logging.
        self._server, self._sock = self._build(log_config=None)
        server, sock = self._server, self._sock
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=f"fake-upstream-{self.port}"
        )
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

    def open_gate(self, name: str) -> None:
        """Let every request waiting at ``[[gate:NAME]]`` (and every later one) answer."""
        _gate(name).set()

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
        if body is None and headers.get("content-type", "").startswith("multipart/form-data"):
            from tests.support.fake_images import read_form  # lazy: it imports this module

            body = read_form(raw, headers["content-type"])
        raw_path = scope.get("raw_path", path.encode()).decode("latin-1")
        record = RecordedRequest(
            method, path, headers, body, query=scope["query_string"].decode("latin-1"), raw_path=raw_path
        )
        with self._lock:  # record before responding, failures included
            self.requests.append(record)
        send = _TrackedSend(send, record)
        watcher = asyncio.ensure_future(_watch_for_hang_up(receive, record))
        try:
            if not await self._serve_cloud(record, scope, raw, receive, send):
                await self._respond(method, path, raw, headers, receive, send)
        finally:
            watcher.cancel()

    async def _serve_cloud(
        self, record: RecordedRequest, scope: Scope, raw: bytes, receive: Receive, send: Send
    ) -> bool:  # fmt: skip
        """Answer a cloud provider's request (Azure, Entra ID, Vertex, Gemini, Bedrock) by its path;
        False for one of OpenAI's or Anthropic's own paths."""
        path, headers = record.path, record.headers
        if path.startswith("/openai/"):  # Azure OpenAI's paths, answered by this fake's OpenAI endpoints
            from tests.support.fake_azure import serve_azure  # lazy: it imports this module

            await serve_azure(self, record, raw, receive, send)
        elif path.startswith("/entra/"):  # Microsoft Entra ID's token endpoint, for Azure's service principals
            from tests.support.fake_entra import serve_entra  # lazy: it imports this module

            await serve_entra(path, raw, send)
        elif path.startswith("/v1/projects/") or path == "/token":  # Google Vertex AI, its token endpoint
            from tests.support.fake_vertex import handle_vertex  # lazy: it imports this module

            await handle_vertex(scope, raw, headers, send, receive)
        elif path.startswith("/v1beta/"):  # Google's Gemini API
            from tests.support.fake_gemini import handle_gemini  # lazy: it imports this module

            await handle_gemini(self.api_key, scope, raw, headers, send, receive)
        elif path.startswith("/model/"):
            from tests.support.fake_bedrock import handle_bedrock  # lazy: it imports this module

            await handle_bedrock(scope, raw, headers, receive, send)
        else:
            return False
        return True

    async def answer_openai(
        self, path: str, raw: bytes, headers: dict[str, str], receive: Receive, send: Send
    ) -> None:  # fmt: skip
        """A POST to one of this fake's OpenAI endpoints (``tests/support/fake_azure.py``: Azure's URLs in front)."""
        await self._respond("POST", path, raw, headers, receive, send)

    async def _respond(
        self, method: str, path: str, raw: bytes, headers: dict[str, str], receive: Receive, send: Send
    ) -> None:
        faulty = _FAULTY_PREFIX.match(path)
        if faulty:
            return await _fault(faulty, send, receive)
        try:
            if method == "GET" and path == "/v1/models":
                await _send_json(send, 200, MODELS)
            elif method == "POST" and path == "/v1/chat/completions":
                await self._chat(raw, headers, receive, send)
            elif method == "POST" and path == "/v1/embeddings":
                from tests.support.fake_embeddings import handle_embeddings  # lazy: it imports this module

                await handle_embeddings(self.api_key, raw, headers, send)
            elif method == "POST" and path == "/v1/responses":
                from tests.support.fake_responses import handle_responses  # lazy: fake_responses imports this module

                await handle_responses(self.api_key, raw, headers, receive, send)
            elif path.startswith("/v1/messages/batches"):
                await self.batches.handle_messages(self.api_key, method, path, raw, headers, send)
            elif path.startswith(("/v1/files", "/v1/batches")):
                await self.batches.handle(self.api_key, method, path, raw, headers, send)
            elif method == "POST" and path.startswith(("/v1/images/", "/v1/audio/")):
                await self._media(path, raw, headers, receive, send)
            elif path == "/v1/messages" or path.startswith("/v1/messages/"):
                from tests.support.fake_anthropic import handle_anthropic  # lazy: fake_anthropic imports this module

                await handle_anthropic(self.api_key, method, path, raw, headers, receive, send)
            else:
                await _send_json(send, 404, error_body("Unknown path", "invalid_request_error"))
        except _Reject as r:
            await _send_json(send, r.status, r.body, r.headers)

    async def _media(self, path: str, raw: bytes, headers: dict[str, str], receive: Receive, send: Send) -> None:
        """OpenAI's image and audio endpoints (``POST``)."""
        # lazy imports: fake_images and fake_audio import this module
        if path == "/v1/images/generations":
            from tests.support.fake_images import handle_image_generation

            await handle_image_generation(self.api_key, raw, headers, send)
        elif path == "/v1/images/edits":
            from tests.support.fake_images import handle_image_edit, read_form

            await handle_image_edit(self.api_key, read_form(raw, headers.get("content-type", "")), headers, send)
        elif path in ("/v1/audio/transcriptions", "/v1/audio/translations"):
            from tests.support.fake_audio import handle_transcription

            await handle_transcription(self.api_key, path, raw, headers, send, receive)
        elif path == "/v1/audio/speech":
            from tests.support.fake_audio import handle_speech

            await handle_speech(self.api_key, raw, headers, send, receive)
        else:
            await _send_json(send, 404, error_body("Unknown path", "invalid_request_error"))

    async def _chat(self, raw: bytes, headers: dict[str, str], receive: Receive, send: Send) -> None:
        req = openai_request(self.api_key, raw, headers)
        if not isinstance(req, dict) or not isinstance(req.get("model"), str):
            raise _Reject(400, error_body("you must provide a model parameter", "invalid_request_error"))
        messages = req.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise _Reject(400, error_body("'messages' must be a non-empty array of objects", "invalid_request_error"))
        stops = _validate_chat(req, messages)
        prefix, source = _echoed(messages)
        text, d = _parse_directives(source)
        await before_answering(d)
        if d.fail is not None:
            raise openai_failure(d.fail, f"fake upstream failure {d.fail}")
        answer = _chat_answer(req, messages, d, prefix, text, stops)
        if req.get("stream") is not True:
            return await _send_completion(answer, d, send, receive)
        opts = req.get("stream_options")
        include_usage = isinstance(opts, dict) and opts.get("include_usage") is True
        await _stream_completion(answer, d, include_usage, send, receive)


def _echoed(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """The reply's prefix and the text it echoes: the last user message, or the trailing tool results
    when a tool turn came last."""
    last = max((i for i, m in enumerate(messages) if m.get("role") in ("user", "tool")), default=None)
    if last is not None and messages[last].get("role") == "tool":
        first = last
        while first > 0 and messages[first - 1].get("role") == "tool":
            first -= 1
        return "Echo: tool result: ", " ".join(message_text(m) for m in messages[first : last + 1])
    return "Echo: ", message_text(messages[last]) if last is not None else ""


@dataclass
class _ChatAnswer:
    """A chat completion before it is sent, whole or streamed: a tool call or the text's pieces, why it
    finished, its usage (None under ``[[no-usage]]``) and the fields every chunk repeats."""

    tool_call: dict[str, Any] | None
    pieces: list[str]
    finish: str
    usage: dict[str, Any] | None
    head: dict[str, Any]


def _chat_answer(
    req: dict[str, Any], messages: list[dict[str, Any]], d: _Directives, prefix: str, text: str, stops: list[str]
) -> _ChatAnswer:
    prompt_tokens = chat_prompt_tokens(messages)
    tool_call: dict[str, Any] | None = None
    pieces: list[str] = []
    finish = "stop"
    if d.tool is not None and req.get("tools"):
        args = msgspec.json.encode(d.tool_args if d.tool_args is not None else {"echo": text}).decode()
        tool_call = {
            "id": "call_" + secrets.token_hex(4),
            "type": "function",
            "function": {"name": d.tool, "arguments": args},
        }
        completion_tokens, finish = len(tokens(args)) + 3, "tool_calls"
    else:
        pieces = tokens(cut_at_stop(prefix + text, stops)[0])
        limit = req.get("max_completion_tokens")
        limit = req.get("max_tokens") if limit is None else limit
        if isinstance(limit, int) and len(pieces) > limit:
            pieces, finish = pieces[:limit], "length"
        completion_tokens = len(pieces)
    completion_tokens += d.reason  # hidden reasoning is billed as completion tokens
    prompt_details: dict[str, int] = {"cached_tokens": d.cached, "audio_tokens": 0}
    if d.cache_write is not None:
        prompt_details["cache_write_tokens"] = d.cache_write
    usage = (
        None
        if d.no_usage
        else {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": prompt_details,
            "completion_tokens_details": {
                "reasoning_tokens": d.reason,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
    )
    head = {
        "id": "chatcmpl-" + secrets.token_hex(12),
        "created": int(time.time()),
        "model": req["model"],
        "system_fingerprint": "fp_fake",
    }
    return _ChatAnswer(tool_call, pieces, finish, usage, head)


async def _send_completion(answer: _ChatAnswer, d: _Directives, send: Send, receive: Receive) -> None:
    if d.drop_after is not None:
        return await _drop(send, receive)
    tool_call, head = answer.tool_call, answer.head
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None if tool_call else "".join(answer.pieces),
        "refusal": None,
    }
    if tool_call:
        message["tool_calls"] = [tool_call]
    out = {
        "id": head["id"],
        "object": "chat.completion",
        **{k: head[k] for k in ("created", "model")},
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": answer.finish}],
    }
    if answer.usage is not None:
        out["usage"] = answer.usage
    return await _send_json(send, 200, out)


async def _stream_completion(
    answer: _ChatAnswer, d: _Directives, include_usage: bool, send: Send, receive: Receive
) -> None:
    tool_call, head = answer.tool_call, answer.head

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        c = {
            "id": head["id"],
            "object": "chat.completion.chunk",
            "created": head["created"],
            "model": head["model"],
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if include_usage:
            c["usage"] = None
        return c

    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
        }
    )
    await _sse(send, chunk({"role": "assistant", "content": None if tool_call else "", "refusal": None}))
    if tool_call:
        args = tool_call["function"]["arguments"]
        size = max(1, -(-len(args) // 3))
        deltas = [
            {"index": 0, "id": tool_call["id"], "type": "function", "function": {"name": d.tool, "arguments": ""}}
        ]
        deltas += [{"index": 0, "function": {"arguments": args[i : i + size]}} for i in range(0, len(args), size)]
        bodies = [{"tool_calls": [td]} for td in deltas]
    else:
        bodies = [{"content": p} for p in answer.pieces]
    for i, delta in enumerate(bodies):
        if d.drop_after is not None and i >= d.drop_after:
            return await _drop(send, receive)
        if d.stream_error and i >= 1:  # an in-stream error after the first delta, as OpenAI sends one
            await _sse(send, error_body("The server had an error processing your request.", "server_error"))
            return await send({"type": "http.response.body", "body": b"", "more_body": False})
        if d.chunk_delay_ms:
            await asyncio.sleep(d.chunk_delay_ms / 1000)
        await _sse(send, chunk(delta))
    if d.drop_after is not None:
        return await _drop(send, receive)
    await _sse(send, chunk({}, answer.finish))
    if include_usage and answer.usage is not None:
        await _sse(send, {**chunk({}), "choices": [], "usage": answer.usage})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def openai_request(api_key: str | None, raw: bytes, headers: dict[str, str]) -> Any:
    """An OpenAI request's JSON body, once its bearer key checks out (OpenAI's 401 and 400 otherwise)."""
    if api_key is not None and headers.get("authorization") != f"Bearer {api_key}":
        raise _Reject(401, error_body("Incorrect API key provided", "invalid_request_error", "invalid_api_key"))
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise _Reject(
            400, error_body("We could not parse the JSON body of your request.", "invalid_request_error")
        ) from None


def _validate_chat(req: dict[str, Any], messages: list[dict[str, Any]]) -> list[str]:
    """The checks OpenAI makes that a translating gateway can get wrong; returns the stop strings."""
    temperature = req.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2
    ):
        raise _bad(f"Invalid 'temperature': expected a number between 0 and 2, got {temperature!r}.", "temperature")
    stop = req.get("stop")
    if (
        stop is not None
        and not isinstance(stop, str)
        and not (isinstance(stop, list) and all(isinstance(x, str) for x in stop))
    ):
        raise _bad("Invalid 'stop': expected a string or an array of strings.", "stop")
    _check_chat_messages(messages)
    return [stop] if isinstance(stop, str) else list(stop or [])


def _check_chat_messages(messages: list[dict[str, Any]]) -> None:
    """Known roles, tool calls with string arguments, and tool messages that answer an earlier call."""
    seen_calls: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in _OPENAI_ROLES:
            raise _bad(
                f"Invalid value: {role!r}. Supported values are: 'system', 'assistant', 'user', "
                f"'function', 'tool', and 'developer'.",
                f"messages[{i}].role",
            )
        if role == "assistant" and m.get("tool_calls") is not None:
            calls = m["tool_calls"]
            if not isinstance(calls, list):
                raise _bad("Invalid type: expected an array.", f"messages[{i}].tool_calls")
            for j, call in enumerate(calls):
                fn = call.get("function") if isinstance(call, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("arguments"), str):
                    raise _bad("Invalid type: expected a string.", f"messages[{i}].tool_calls[{j}].function.arguments")
                if isinstance(call.get("id"), str):
                    seen_calls.add(call["id"])
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str):
                raise _bad(
                    "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'.",
                    f"messages[{i}].tool_call_id",
                )
            if call_id not in seen_calls:
                raise _bad(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                    "message with 'tool_calls'.",
                    f"messages[{i}].role",
                )


async def _fault(faulty: re.Match[str], send: Send, receive: Receive) -> None:
    """A faulty base URL's answer: its status in the error shape of the protocol asked for (OpenAI's,
    Anthropic's, Google's or Bedrock's), none at all, or a 200 that breaks off."""
    if faulty.group("hang"):
        while (await receive())["type"] != "http.disconnect":  # the caller gives up and hangs up
            pass
        return None
    if faulty.group("cut"):
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"100")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"id": "chatcmpl-cut", "object": ', "more_body": True})
        return await _drop(send, receive)
    status = int(faulty.group("status"))
    message = f"fake deployment failure {status}"
    extra = [(b"retry-after", b"1")] if status == 429 else []
    if faulty.group("rest").startswith("/v1/messages"):
        from tests.support.fake_anthropic import anthropic_error, error_type  # lazy: fake_anthropic imports this module

        return await _send_json(send, status, anthropic_error(error_type(status), message), extra)
    if faulty.group("rest").startswith("/v1beta/"):
        from tests.support.fake_gemini import GeminiRefusal  # lazy: fake_gemini imports this module

        return await _send_json(send, status, GeminiRefusal(status, message).body(), extra)
    if faulty.group("rest").startswith("/model/"):
        from tests.support.fake_bedrock import BedrockRefusal, refuse  # lazy: fake_bedrock imports this module

        kinds = {400: "ValidationException", 429: "ThrottlingException", 503: "ServiceUnavailableException"}
        return await refuse(send, BedrockRefusal(status, kinds.get(status, "InternalServerException"), message))
    failure = openai_failure(status, message)
    await _send_json(send, status, failure.body, failure.headers)


async def _send_json(send: Send, status: int, body: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    data = msgspec.json.encode(body)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": data, "more_body": False})


async def _sse(send: Send, payload: dict[str, Any]) -> None:
    """One SSE frame per ASGI message, so the client really sees an incremental stream."""
    await send(
        {"type": "http.response.body", "body": b"data: " + msgspec.json.encode(payload) + b"\n\n", "more_body": True}
    )


async def _drop(send: Send, receive: Receive) -> None:
    """Break the TCP connection mid-response, the way a crashing upstream does.

    uvicorn turns an app exception into a 500 when no response has started, which
    is not a dropped connection; so close uvicorn's transport (reachable through
    the bound ``send``) directly, flushing what was already sent, and wait for
    the disconnect so uvicorn doesn't log an incomplete response.  If that
    internal is ever missing, fall back to raising (uvicorn then closes).
    """
    record = getattr(send, "record", None)
    if record is not None:
        record.dropped = True
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None or not hasattr(transport, "close"):
        raise _Drop("fake upstream dropped the connection")
    transport.close()
    try:
        while (await asyncio.wait_for(receive(), 2.0))["type"] != "http.disconnect":
            pass
    except TimeoutError:
        raise _Drop("fake upstream dropped the connection") from None


def main(argv: list[str] | None = None) -> None:
    """Serve in the foreground (Ctrl-C to stop) for manual poking with curl or the gateway."""
    p = argparse.ArgumentParser(description="Fake OpenAI-compatible and Anthropic Messages upstream")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9100)
    p.add_argument("--api-key", default="upstream-secret", help="required bearer key ('' disables auth)")
    a = p.parse_args(argv)
    fake = FakeUpstream(api_key=a.api_key or None, host=a.host, port=a.port)
    server, sock = fake._build(log_config=uvicorn.config.LOGGING_CONFIG)
    print(f"fake upstream listening on {fake.base_url} (Anthropic clients: {fake.anthropic_base_url})", flush=True)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the captured signal after a graceful shutdown
        server.run(sockets=[sock])


if __name__ == "__main__":
    # Run as ``python -m tests.support.fake_upstream``, this file is ``__main__``, while the Anthropic and
    # Responses fakes import it as ``tests.support.fake_upstream``: serve with the module they import, so
    # that one class ``_Reject`` is raised and caught.
    from tests.support.fake_upstream import main as imported_main

    imported_main()
