"""Fixtures of both layers: the database server (and, for the end-to-end layer, Redis) checked once,
the databases a run created dropped, and the fake upstream (a real HTTP server on a loopback port,
in a thread of this process)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.backend import BACKEND, check_redis, check_server, drop_created_databases
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import UPSTREAM_KEY


def pytest_sessionstart(session: pytest.Session) -> None:
    problem = check_server()
    if problem:
        pytest.exit(problem, returncode=3)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The end-to-end layer's gateways keep rate limits in Redis when several share a database: a run
    that collected any of its tests needs Redis, and fails at once (never skips) without it."""
    if any(item.nodeid.startswith("tests/e2e/") for item in session.items):
        problem = check_redis()
        if problem:
            pytest.exit(problem, returncode=3)


def pytest_sessionfinish(session: pytest.Session) -> None:
    drop_created_databases()


def pytest_report_header() -> str:
    return f"tollgate ledger backend: {BACKEND}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from tests.support.screenshots import report  # the browser tests' screenshots, where to find them

    report(terminalreporter)


@pytest.fixture(scope="session")
def fake_upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(api_key=UPSTREAM_KEY) as upstream:
        yield upstream


@pytest.fixture(autouse=True)
def _forget_upstream_requests(request: pytest.FixtureRequest) -> None:
    if "fake_upstream" in request.fixturenames:
        request.getfixturevalue("fake_upstream").clear()
