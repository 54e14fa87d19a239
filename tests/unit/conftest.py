"""The unit layer's gateway: the real application in this process (``tests/support/in_process.py``),
on a ledger database of its own, with the built-in demo upstream and the fake upstream's models."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import GATEWAY_ENV, write_config
from tests.support.in_process import InProcessGateway, ledger_of


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
