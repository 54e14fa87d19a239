"""An upstream that answers with exactly the bytes a test gives it, written in the pieces it gives.

The fake upstream (``fake_upstream.py``) is a provider: it reads the request and composes an answer.
This one is a wire: a real HTTP server on a loopback port (raw asyncio, in a thread of the test's
process) that answers every POST with the next canned answer — a 200 whose body is the given pieces,
each written apart (``TCP_NODELAY``, a pause after each) and the connection closed at the end, so that
a test decides how the gateway's reads cut the upstream's stream: all in one read, an event split
across reads at any byte, a long wait between two bursts.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import deque
from dataclasses import dataclass


@dataclass
class Canned:
    pieces: list[bytes]
    pause: float = 0.0  # seconds after each piece
    content_type: bytes = b"text/event-stream"


class CannedUpstream:
    def __init__(self) -> None:
        self._answers: deque[Canned] = deque()
        self.requests: list[bytes] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def answer(self, pieces: list[bytes], *, pause: float = 0.0, content_type: bytes = b"text/event-stream") -> None:
        """The next request's answer."""
        self._answers.append(Canned(pieces, pause, content_type))

    def __enter__(self) -> CannedUpstream:
        started = threading.Event()

        def run() -> None:
            loop = self._loop = asyncio.new_event_loop()
            self._server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            started.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, daemon=True, name="canned-upstream")
        self._thread.start()
        started.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        loop, server = self._loop, self._server
        if loop is not None and server is not None:

            async def stop() -> None:
                server.close()
                answering = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in answering:  # an answer still being written, to a client that left
                    task.cancel()
                await asyncio.gather(*answering, return_exceptions=True)
                loop.stop()

            asyncio.run_coroutine_threadsafe(stop(), loop)
        if self._thread is not None:
            self._thread.join(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            self.requests.append(await reader.readexactly(length))
            canned = self._answers.popleft()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: " + canned.content_type + b"\r\nconnection: close\r\n\r\n")
            await writer.drain()
            for piece in canned.pieces:
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(canned.pause)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the gateway hung up: what a test that cuts a stream short asks for
        finally:
            writer.close()
