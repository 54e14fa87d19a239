"""Which failed upstream requests may be sent again, once, on a fresh connection.

A pooled keep-alive connection can be closed by the upstream at any moment it is idle (its own
keep-alive timeout, a restart, a load balancer's), and the close may cross the next request on the
wire: the request is written, and the connection is reset, or closed, before any answer comes. The
upstream never began answering it, and an idle connection it closed had not read it. Browsers and
Envoy send such a request again on a new connection; aiohttp does too, but only for idempotent
methods, and every upstream call is a POST. So the gateway does it itself (RFC 9112, 9.3.1):

- a request that provably never reached the upstream (its connection was refused), or that died on a
  **reused** connection (reset, closed, unwritable) before **any byte** of an answer arrived, is sent
  once more on a fresh connection;
- never when any byte of an answer had arrived (the upstream was answering: it had the request),
  never after a timeout, never on a connection opened for that request (the upstream may have read
  it), and never twice: the second attempt's failure is the request's failure (which the model's
  other deployments may then take, ``app/upstream/fallback.py``).

What it takes to know that: the protocol aiohttp reads a connection with, counting the requests made
on its connection (so a reused one is told from a new one) and noting the first byte that arrives
for the request being made on it, which it finds in a context variable set around the request.
"""

from __future__ import annotations

import asyncio
import functools
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, cast

import aiohttp
from aiohttp.client_proto import ResponseHandler


@dataclass(slots=True)
class Attempt:
    """One request's try on one connection: whether the connection had served a request before,
    and whether any byte of an answer came back on it."""

    reused: bool = False
    answered: bool = False

    def may_retry(self, exc: BaseException) -> bool:
        """Whether the request, having failed with ``exc``, goes once more on a fresh connection."""
        if isinstance(exc, aiohttp.ClientConnectorError):
            return type(exc) is aiohttp.ClientConnectorError and isinstance(exc.os_error, ConnectionRefusedError)
        if isinstance(exc, (aiohttp.ServerTimeoutError, asyncio.TimeoutError)):
            return False
        return isinstance(exc, aiohttp.ClientConnectionError) and self.reused and not self.answered


_attempt: ContextVar[Attempt | None] = ContextVar("tollgate_upstream_attempt", default=None)


def watched(attempt: Attempt) -> Any:
    """Make the connections of requests in this context report to ``attempt``; returns the token to
    give back to :func:`unwatched`."""
    return _attempt.set(attempt)


def unwatched(token: Any) -> None:
    _attempt.reset(token)


class _WatchedHandler(ResponseHandler):
    """aiohttp's reader of a connection, reporting to the request made on it (the one whose context
    set up the response parameters, which aiohttp does for each request, before sending it)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self._requests = 0
        self._attempt: Attempt | None = None

    def set_response_params(self, **kwargs: Any) -> None:
        attempt = self._attempt = _attempt.get()
        if attempt is not None:
            attempt.reused = self._requests > 0
        self._requests += 1
        super().set_response_params(**kwargs)

    def data_received(self, data: bytes) -> None:
        if data and self._attempt is not None:
            self._attempt.answered = True
        super().data_received(data)


class WatchedConnector(aiohttp.TCPConnector):
    """A pooled connector whose connections say which request they carry and what came back for it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # aiohttp makes each connection's protocol with this factory (the one hook it has for that)
        self._factory = cast("functools.partial[ResponseHandler]", functools.partial(_WatchedHandler, loop=self._loop))
