"""Which failures send a request once more on a fresh connection (``app/upstream/connections.py``)."""

from __future__ import annotations

import errno

import aiohttp
import pytest
from aiohttp.client_reqrep import ConnectionKey

from app.upstream.connections import Attempt

KEY = ConnectionKey("upstream.example", 443, True, True, None, None, None)
RESET = aiohttp.ClientOSError(errno.ECONNRESET, "Connection reset by peer")
CLOSED = aiohttp.ServerDisconnectedError()
UNWRITABLE = aiohttp.ClientConnectionResetError("Cannot write to closing transport")


@pytest.mark.parametrize("failure", [RESET, CLOSED, UNWRITABLE])
def test_a_reused_connection_that_died_before_any_byte_came_back_is_replaced(failure: Exception):
    assert Attempt(reused=True).may_retry(failure)
    assert not Attempt(reused=True, answered=True).may_retry(failure)  # the upstream was answering
    assert not Attempt(reused=False).may_retry(failure)  # a new connection: the upstream may have read it


def test_a_refused_connection_never_reached_the_upstream():
    refused = aiohttp.ClientConnectorError(KEY, ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"))
    assert Attempt().may_retry(refused)


@pytest.mark.parametrize(
    "failure",
    [
        aiohttp.ConnectionTimeoutError("connect"),
        aiohttp.SocketTimeoutError("read"),
        TimeoutError(),
        aiohttp.ClientConnectorDNSError(KEY, OSError(errno.ENOENT, "no such host")),
        aiohttp.ClientConnectorError(KEY, OSError(errno.EHOSTUNREACH, "No route to host")),
        aiohttp.ClientPayloadError("cut"),
    ],
)
def test_timeouts_and_other_failures_are_not_sent_again(failure: Exception):
    assert not Attempt(reused=True).may_retry(failure)
