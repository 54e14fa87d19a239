"""One gateway for the fuzzers (its credit leases given back quickly, so that each request's effect
on the money can be seen alone), one team paying for them, one watch on its audit history
projection, and one tally of what broke."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.embeddings_models import embeddings_model
from tests.support.fake_upstream import FakeUpstream
from tests.support.fuzz.harness import Ledger, Run, Tally
from tests.support.fuzz.projection import Positions, ProjectionWatch, behind_at_end
from tests.support.gateway import Gateway, write_config
from tests.support.spend_models import spend_models
from tests.support.teams import Team, Teams

#: Where the run's tally is written as JSON when set (scripts/fuzz.py reads it).
SUMMARY_ENV = "TOLLGATE_FUZZ_SUMMARY"


@pytest.fixture(scope="session")
def fuzz_gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    config = write_config(tmp_path_factory.mktemp("fuzz"), fake_upstream.base_url, lease_idle_seconds="0.05")
    config.write_text(
        config.read_text() + embeddings_model(fake_upstream.base_url) + spend_models(fake_upstream.base_url)
    )
    gw = Gateway(config).start()
    yield gw
    gw.stop()


@pytest.fixture(scope="session")
def fuzz_team(fuzz_gateway: Gateway) -> Team:
    teams = Teams(fuzz_gateway.config)
    try:
        return teams.open("100000")
    finally:
        teams.close()


@pytest.fixture(scope="session")
def positions(fuzz_gateway: Gateway) -> Iterator[Positions]:
    """The audit history projection's position and the newest event, read from the gateway's database."""
    read = Positions(fuzz_gateway.config)
    yield read
    read.close()


@pytest.fixture(scope="session")
def run_tally(positions: Positions) -> Iterator[Tally]:
    """Every fuzzer's cases and failures, for the one-line summary of a whole run, which ends by
    saying whether the projection caught up with every event the run wrote."""
    tally = Tally()
    yield tally
    tally.behind = behind_at_end(positions)
    where = os.environ.get(SUMMARY_ENV)
    if where:
        Path(where).write_text(json.dumps(tally.as_json(), indent=1))


@pytest.fixture(scope="session")
def projection(positions: Positions) -> ProjectionWatch:
    """The cases whose events the audit history projection has not passed yet, across fuzzers."""
    return ProjectionWatch(positions)


@pytest.fixture
def run(run_tally: Tally, fuzz_gateway: Gateway, projection: ProjectionWatch) -> Iterator[Run]:
    """This test's run, added to the whole run's tally when it ends."""
    mine = Run(fuzz_gateway, projection)
    yield mine
    run_tally.add(mine.tally)


@pytest.fixture(scope="module", autouse=True)
def ledger_verified(fuzz_gateway: Gateway, projection: ProjectionWatch, run_tally: Tally) -> Iterator[None]:
    """After a module's fuzzers, the gateway's own projector has caught the audit history up with
    every event they wrote (within a few seconds: it had not stopped behind one of them), and every
    request they had served was charged exactly once: the ledger replays clean."""
    yield
    stall = projection.settle()
    if stall is not None:
        stall.tally(run_tally)
    assert stall is None, f"{stall.detail()}\n    by {stall.route}: {stall.example[:300]!r}"
    result = fuzz_gateway.cli("ledger", "verify", check=False)
    assert result.returncode == 0, f"ledger verify failed after fuzzing:\n{result.stdout}{result.stderr}"


@pytest.fixture
def ledger(fuzz_gateway: Gateway, fuzz_team: Team) -> Iterator[Ledger]:
    with Ledger(fuzz_gateway, fuzz_team.name, fuzz_team.key) as ledger:
        yield ledger
