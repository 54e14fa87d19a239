"""HTTP/1.1 over a plain socket, for what no client library sends: a head that never ends, a body
announced and never sent, headers by the thousand, a reader that stops reading."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Reply:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body)


def connect(port: int, *, timeout: float = 10.0, receive_buffer: int | None = None) -> socket.socket:
    """A connection to the gateway; ``receive_buffer`` shrinks the socket's receive buffer (before it
    connects, so the window the gateway sees is small from the start)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(timeout)
    sock.connect(("127.0.0.1", port))
    return sock


def head(method: str, path: str, headers: dict[str, str] | list[tuple[str, str]], body: bytes | None = None) -> bytes:
    """A request's line and headers (with ``content-length`` when ``body`` is given), and the body."""
    items = list(headers.items()) if isinstance(headers, dict) else list(headers)
    if body is not None:
        items.append(("content-length", str(len(body))))
    lines = [f"{method} {path} HTTP/1.1", "host: 127.0.0.1", *(f"{name}: {value}" for name, value in items)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


def read_reply(sock: socket.socket) -> Reply:
    """One response: its status, headers and body (by ``content-length``, or what comes until close)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"the connection closed before a response head: {data!r}")
        data += chunk
    raw_head, _, body = data.partition(b"\r\n\r\n")
    lines = raw_head.decode("latin-1").split("\r\n")
    reply = Reply(int(lines[0].split()[1]))
    for line in lines[1:]:
        name, _, value = line.partition(":")
        reply.headers[name.strip().lower()] = value.strip()
    length = reply.headers.get("content-length")
    while length is not None and len(body) < int(length):
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    reply.body = body
    return reply


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the other side closed the connection (reads end, or are reset) within the socket's timeout."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def exchange(port: int, data: bytes, *, timeout: float = 10.0) -> tuple[Reply, bool]:
    """Send ``data`` on a new connection, read one response; also whether the gateway then closed it."""
    with connect(port, timeout=timeout) as sock:
        sock.sendall(data)
        reply = read_reply(sock)
        sock.settimeout(2)
        return reply, closed_by_peer(sock)


def post_raw(port: int, path: str, headers: list[tuple[bytes, bytes]], body: bytes, *, timeout: float = 60.0) -> Reply:
    """POST ``body`` with header values exactly as given — bytes no client library sends (a NUL, a
    bare CR or LF inside a value) included — on a new connection; the reply (not a stream)."""
    lines = [
        f"POST {path} HTTP/1.1".encode(),
        b"host: 127.0.0.1",
        *(name + b": " + value for name, value in headers),
        b"content-length: " + str(len(body)).encode(),
        b"connection: close",
    ]
    with connect(port, timeout=timeout) as sock:
        sock.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        return read_reply(sock)
