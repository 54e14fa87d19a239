"""An OpenAI-compatible upstream whose keep-alive connections die the ways pooled connections die.

The fake upstream (``fake_upstream.py``) is uvicorn, which closes an idle connection after 5 seconds:
a request that the gateway writes on a pooled connection just as uvicorn closes it dies before any
answer, and only now and then. This server makes that happen on purpose: a raw asyncio HTTP/1.1
server (in a thread of the test's process) that answers each request on a keep-alive connection, or —
as its ``fate`` says for the n-th request on the m-th connection — breaks the connection instead:

- ``answer``: a chat completion (or its stream), ``content-length`` framed, the connection kept;
- ``reset``: reads the request, then resets the connection (``SO_LINGER`` 0), answering nothing;
- ``close``: reads the request, then closes the connection (FIN), answering nothing;
- ``partial``: reads the request, sends the first bytes of a status line, waits until they surely
  arrived, then resets.

Every request is recorded with its connection, its place on that connection, the model asked for and
its fate, so that a test can tell whether the gateway sent it again and on which connection.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: (connection number, request number on that connection), both from 1 → what happens to the request.
Fate = Callable[[int, int], str]

COMPLETION_TEXT = "pong"


@dataclass
class Seen:
    connection: int
    nth: int
    model: str
    fate: str


@dataclass
class KeepAliveUpstream:
    fate: Fate = field(default=lambda connection, nth: "answer")
    seen: list[Seen] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _server: asyncio.Server | None = None
    _thread: threading.Thread | None = None
    _connections: int = 0
    _open: set[asyncio.StreamWriter] = field(default_factory=set)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> KeepAliveUpstream:
        started = threading.Event()

        def run() -> None:
            loop = self._loop = asyncio.new_event_loop()
            self._server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            started.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, daemon=True, name="keepalive-upstream")
        self._thread.start()
        started.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        loop, server = self._loop, self._server
        if loop is not None and server is not None:

            async def stop() -> None:
                server.close()
                for writer in list(self._open):
                    writer.close()
                serving = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in serving:
                    task.cancel()
                await asyncio.gather(*serving, return_exceptions=True)
                loop.stop()

            asyncio.run_coroutine_threadsafe(stop(), loop)
        if self._thread is not None:
            self._thread.join(10)

    def start_over(self, fate: Fate) -> None:
        """A new test: every connection the gateway keeps closed (cleanly, while idle), the record
        cleared, connections counted from 1 again, and ``fate`` deciding from now on."""
        assert self._loop is not None

        async def close_all() -> None:
            for writer in list(self._open):
                writer.close()
            self._open.clear()

        asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(5)
        self.fate, self.seen, self._connections = fate, [], 0
        time.sleep(0.3)  # the gateway has seen those connections close, and dropped them from its pool

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections += 1
        connection, nth = self._connections, 0
        self._open.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return  # the gateway closed the connection, or it was closed here
                length = next(
                    (
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                body = json.loads(await reader.readexactly(length))
                nth += 1
                fate = self.fate(connection, nth)
                self.seen.append(Seen(connection, nth, str(body.get("model")), fate))
                if fate != "answer":
                    await _break(writer, fate)
                    return
                writer.write(_answer(body))
                await writer.drain()
        finally:
            self._open.discard(writer)
            writer.close()


async def _break(writer: asyncio.StreamWriter, fate: str) -> None:
    sock: socket.socket = writer.get_extra_info("socket")
    if fate == "partial":
        writer.write(b"HTTP/1.1 2")
        await writer.drain()
        await asyncio.sleep(0.3)  # the bytes are read before the reset comes
    if fate in ("reset", "partial"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
    writer.close()


def _answer(body: dict) -> bytes:
    """A chat completion for ``body``, whole or streamed (with usage), framed by ``content-length``."""
    usage = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
    head = {"id": "chatcmpl-keepalive", "created": 1700000000, "model": body.get("model")}
    if body.get("stream"):
        chunks = [
            {
                **head,
                "object": "chat.completion.chunk",
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": COMPLETION_TEXT}, "finish_reason": None}
                ],
            },
            {
                **head,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            },
            {**head, "object": "chat.completion.chunk", "choices": [], "usage": usage},
        ]
        content = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        kind = b"text/event-stream"
    else:
        content = json.dumps(
            {
                **head,
                "object": "chat.completion",
                "usage": usage,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": COMPLETION_TEXT}, "finish_reason": "stop"}
                ],
            }
        ).encode()
        kind = b"application/json"
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: "
        + kind
        + b"\r\ncontent-length: "
        + str(len(content)).encode()
        + b"\r\n\r\n"
        + content
    )
