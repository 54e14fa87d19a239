"""A gateway the suite starts on a port another process took meanwhile starts anyway.

``free_port`` finds a port free and lets it go; before the gateway binds it, another process can
take it. A CI run once lost three tests' module gateway to that ("address already in use"), when
free ports were the kernel's picks, which outgoing connections draw from too; they are now drawn
below that range, and the harness also starts such a gateway again: on another port the first
time, on its own port when it is started again after a stop (its clients know that address).
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from tests.support import plain_http
from tests.support.gateway import Gateway, write_config

UPSTREAM = "http://127.0.0.1:9/v1"  # never called: the gateway only starts


def _listening_on(port: int) -> socket.socket:
    held = socket.socket()
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    held.bind(("127.0.0.1", port))
    held.listen()
    return held


def test_a_first_start_moves_to_a_free_port(tmp_path: Path) -> None:
    held = _listening_on(0)
    taken = held.getsockname()[1]
    gateway = Gateway(write_config(tmp_path, UPSTREAM), port=taken)
    try:
        gateway.start()
        assert gateway.port != taken
        assert plain_http.get(gateway.base_url + "/models").status_code == 200
    finally:
        gateway.stop()
        held.close()


def test_a_restart_waits_for_its_own_port(tmp_path: Path) -> None:
    gateway = Gateway(write_config(tmp_path, UPSTREAM)).start()
    port = gateway.port
    gateway.stop()
    held = _listening_on(port)
    threading.Timer(1.5, held.close).start()
    started = time.monotonic()
    try:
        gateway.start()
        assert gateway.port == port
        assert time.monotonic() - started >= 1.5
        assert plain_http.get(gateway.base_url + "/models").status_code == 200
    finally:
        gateway.stop()
        held.close()
