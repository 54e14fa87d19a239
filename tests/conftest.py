"""Shared fixtures: the fake upstream and a gateway process on real loopback ports."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest

from app.ledger.results import Limits
from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from domain.money import micros_from_credits
from domain.settings import parse_settings
from projections.event_store import open_ledger_store
from tests.backend import BACKEND, check_server, drop_created_databases
from tests.fake_upstream import FakeUpstream
from tests.gateway import UPSTREAM_KEY, Gateway, write_config

_team_numbers = itertools.count(1)


def pytest_sessionstart(session: pytest.Session) -> None:
    problem = check_server()
    if problem:
        pytest.exit(problem, returncode=3)


def pytest_sessionfinish(session: pytest.Session) -> None:
    drop_created_databases()


def pytest_report_header() -> str:
    return f"tollgate ledger backend: {BACKEND}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from tests.screenshots import report  # the browser tests' screenshots, where to find them

    report(terminalreporter)


@pytest.fixture(scope="session")
def fake_upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(api_key=UPSTREAM_KEY) as upstream:
        yield upstream


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    config = write_config(tmp_path_factory.mktemp("gateway"), fake_upstream.base_url)
    gw = Gateway(config).start()
    yield gw
    gw.stop()


@dataclass(frozen=True)
class Team:
    name: str
    key: str


class Teams:
    """Opens teams on a gateway's ledger, as an operator would from another process."""

    def __init__(self, config: Path) -> None:
        settings = parse_settings(config.read_text(), str(config))
        self._store = open_ledger_store(settings.database_url, config.parent)
        self._writer = LedgerWriter(self._store).start()
        self._ledger = LedgerService(self._writer)

    def open(self, credits: str = "100", key_rpm: int | None = None) -> Team:
        name = f"team-{next(_team_numbers)}"
        self._ledger.create_team(name, micros_from_credits(credits))
        return Team(name, self._ledger.issue_key(name, limits=Limits(rpm=key_rpm)).secret)

    def close(self) -> None:
        self._writer.stop()
        self._store.close()


@pytest.fixture(scope="session")
def teams(gateway: Gateway) -> Iterator[Teams]:
    t = Teams(gateway.config)
    yield t
    t.close()


@pytest.fixture
def team(teams: Teams) -> Team:
    return teams.open("100")


@pytest.fixture
def client(gateway: Gateway, team: Team) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0)


@pytest.fixture(scope="module")
def ledger_verified_after(gateway: Gateway) -> Iterator[None]:
    """After a module of fault tests, the session gateway's ledger must still replay clean: every
    failure charged exactly once or not at all (``pytestmark = pytest.mark.usefixtures(...)``)."""
    yield
    result = gateway.cli("ledger", "verify", check=False)
    assert result.returncode == 0, f"ledger verify failed after the module's faults:\n{result.stdout}{result.stderr}"


@pytest.fixture(autouse=True)
def _forget_upstream_requests(request: pytest.FixtureRequest) -> None:
    if "fake_upstream" in request.fixturenames:
        request.getfixturevalue("fake_upstream").clear()
