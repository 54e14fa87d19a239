"""The end-to-end layer's fixtures: a gateway process on a real loopback port, teams on its ledger,
the official SDK as a client, and headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest

from tests.support.browser import browser  # noqa: F401  (a fixture, for the dashboard and schema page tests)
from tests.support.fake_stripe import FakeStripe
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Team, Teams


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    config = write_config(tmp_path_factory.mktemp("gateway"), fake_upstream.base_url)
    gw = Gateway(config).start()
    yield gw
    gw.stop()


@pytest.fixture(scope="session")
def teams(gateway: Gateway) -> Iterator[Teams]:
    t = Teams(gateway.config)
    yield t
    t.close()


@pytest.fixture
def team(teams: Teams) -> Team:
    return teams.open("100")


@pytest.fixture
def client(gateway: Gateway, team: Team) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gateway.base_url, api_key=team.key, max_retries=0) as client:
        yield client


@pytest.fixture
def claude(gateway: Gateway, team: Team) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=gateway.root_url, api_key=team.key, max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def ledger_verified_after(gateway: Gateway) -> Iterator[None]:
    """After a module of fault tests, the session gateway's ledger must still replay clean: every
    failure charged exactly once or not at all (``pytestmark = pytest.mark.usefixtures(...)``)."""
    yield
    result = gateway.cli("ledger", "verify", check=False)
    assert result.returncode == 0, f"ledger verify failed after the module's faults:\n{result.stdout}{result.stderr}"


@pytest.fixture(scope="module")
def stripe_fake() -> Iterator[FakeStripe]:
    """A fake Stripe for the module (tests/support/fake_stripe.py), proven with the official library."""
    with FakeStripe() as fake:
        yield fake
