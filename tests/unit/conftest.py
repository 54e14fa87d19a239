"""The unit layer's gateway: the real application in this process (``tests/support/in_process.py``),
on a ledger database of its own, with the built-in demo upstream and the fake upstream's models.

The layer needs no service: no Redis ever, and PostgreSQL only in the PostgreSQL half
(``TOLLGATE_TEST_BACKEND=postgresql``, which runs its ledger tests). A test that opens a socket to
Redis's port, or on SQLite to PostgreSQL's, fails (``_no_services``): it belongs in tests/e2e."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.backend import BACKEND, POSTGRES_ADMIN_URL, REDIS_URL
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import GATEWAY_ENV, write_config
from tests.support.in_process import InProcessGateway, ledger_of
from tests.support.schema_template import ledgers_from_a_template


@pytest.fixture
def gateway(tmp_path: Path, fake_upstream: FakeUpstream) -> Iterator[InProcessGateway]:
    """A gateway of the test's own, which the test may stop to read its ledger (``ledger_of``)."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in GATEWAY_ENV.items():  # the upstream's key and the admin key, as a process gets them
            env.setenv(name, value)
        running = InProcessGateway(write_config(tmp_path, fake_upstream.base_url))
        yield running
        running.stop()


@pytest.fixture(scope="module")
def shared_gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[InProcessGateway]:
    """One gateway for a module's tests, each on a team of its own; when they are done, its ledger
    must replay clean."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in GATEWAY_ENV.items():
            env.setenv(name, value)
        running = InProcessGateway(write_config(tmp_path_factory.mktemp("gateway"), fake_upstream.base_url))
        yield running
        with ledger_of(running):
            pass


def _service_ports() -> dict[int, str]:
    """The ports of the services the unit layer must not reach, by the name of the service."""
    ports = dict.fromkeys({6379, urlsplit(REDIS_URL).port or 6379}, "Redis")
    if BACKEND == "sqlite":
        ports.update(dict.fromkeys({5432, urlsplit(POSTGRES_ADMIN_URL).port or 5432}, "PostgreSQL"))
    return ports


# The two fixtures below are the package's, not the session's: a run that goes on with tests/e2e
# (make test-postgresql; an xdist worker given files of both layers) reaches Redis, and makes its
# ledgers from nothing, again once the unit tests are done.
@pytest.fixture(autouse=True, scope="package")
def _no_services() -> Iterator[None]:
    """Refuse every connection this process opens to a service's port (Python's sockets: Redis's
    client; psycopg's libpq connects in C, and ``TOLLGATE_TEST_POSTGRES_URL`` pointed at a closed port
    proves the SQLite half reaches no PostgreSQL)."""
    ports = _service_ports()
    original_connect, original_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def refused(address: Any) -> None:
        if isinstance(address, tuple) and len(address) >= 2 and address[1] in ports:
            raise AssertionError(
                f"a unit test connected to {ports[address[1]]} ({address[0]}:{address[1]}): "
                "the unit layer runs with no service; such a test belongs in tests/e2e"
            )

    def connect(self: socket.socket, address: Any) -> None:
        refused(address)
        original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        refused(address)
        return original_connect_ex(self, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect_ex)
        yield


@pytest.fixture(autouse=True, scope="package")
def _ledgers_from_a_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """New ledgers are copies of one migrated once (tests/support/schema_template.py)."""
    with ledgers_from_a_template(tmp_path_factory.mktemp("template")):
        yield
