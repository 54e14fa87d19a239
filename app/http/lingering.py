"""Closing a connection whose client is still sending, so that it reads its answer rather than a reset.

An answer given before the request's body was in — a 401, a 413, a 408, a refused head — closes the
connection (``app/http/request_guard.py``): otherwise the gateway would read, and throw away, as much
body as the client cared to send. But a socket closed with unread data in it, or that receives more
afterwards, answers with a TCP reset: a client still writing its body then fails on that write
(``ECONNRESET``, ``EPIPE``), and many report only that, never reading the answer already waiting for
them (and some systems throw the waiting answer away on the reset).

So the close lingers, as web servers' "lingering close" does: the answer goes out followed by the
end of the gateway's side of the stream (a half-close: ``write_eof``), and whatever the client still
sends is read and dropped until it closes its side — then the connection is closed without a reset.
A client that neither closes nor stops is bounded: the connection is closed once it has sent less
than ``KEEPS_GOING`` bytes in ``IDLE`` seconds (a trickle is not a client busy sending its body), or
``AT_MOST`` seconds after the answer, whichever comes first. A close with nothing unread (the end of
an idle keep-alive connection, a refused head) does not linger.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

#: Seconds a lingering connection waits for more from its client before it is closed.
IDLE = 2.0
#: Seconds a lingering connection is read and dropped at most.
AT_MOST = 30.0
#: Bytes a lingering client must send within ``IDLE`` seconds to be waited for longer.
KEEPS_GOING = 16 * 1024


class LingeringTransport:
    """A connection's transport whose ``close`` lingers while ``unread()`` says the client may still
    be sending; everything else is the transport's own. While it lingers it says it is closing, so
    the HTTP protocol reads nothing more as a request."""

    def __init__(
        self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop, unread: Callable[[], bool]
    ) -> None:
        self._transport = transport
        self._loop = loop
        self._unread = unread
        self.lingering = False
        self._since_idle = 0  # bytes dropped since the idle timer last started
        self._idle: asyncio.TimerHandle | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def close(self) -> None:
        transport = self._transport
        if self.lingering or transport.is_closing():
            return
        if not self._unread() or not transport.can_write_eof():
            transport.close()
            return
        self.lingering = True
        transport.write_eof()  # after what is buffered: the answer goes out whole, then our end of the stream
        transport.resume_reading()  # the body may have filled the buffers, its reading paused
        self._idle = self._loop.call_later(IDLE, self.end)
        self._deadline = self._loop.call_later(AT_MOST, self.end)

    def dropped(self, size: int) -> None:
        """``size`` more bytes of what the client sends arrived, and were dropped."""
        self._since_idle += size
        if self._idle is not None and self._since_idle >= KEEPS_GOING:  # still busy sending: wait for it
            self._idle.cancel()
            self._idle = self._loop.call_later(IDLE, self.end)
            self._since_idle = 0

    def end(self) -> None:
        """Stop lingering: close the connection now (the client's end came, or it took too long)."""
        self._stop_timers()
        self._transport.close()

    def lost(self) -> None:
        self._stop_timers()

    def _stop_timers(self) -> None:
        for timer in (self._idle, self._deadline):
            if timer is not None:
                timer.cancel()
        self._idle = self._deadline = None
