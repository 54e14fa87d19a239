"""One gateway for the fuzzers (its credit leases given back quickly, so that each request's effect
on the money can be seen alone), one team paying for them, and one tally of what broke."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fake_upstream import FakeUpstream
from tests.support.fuzz.harness import Ledger, Run, Tally
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Team, Teams

#: Where the run's tally is written as JSON when set (scripts/fuzz.py reads it).
SUMMARY_ENV = "TOLLGATE_FUZZ_SUMMARY"


@pytest.fixture(scope="session")
def fuzz_gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[Gateway]:
    gw = Gateway(write_config(tmp_path_factory.mktemp("fuzz"), fake_upstream.base_url,
                              lease_idle_seconds="0.05")).start()
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
def run_tally() -> Iterator[Tally]:
    """Every fuzzer's cases and failures, for the one-line summary of a whole run."""
    tally = Tally()
    yield tally
    where = os.environ.get(SUMMARY_ENV)
    if where:
        Path(where).write_text(json.dumps(tally.as_json(), indent=1))


@pytest.fixture
def run(run_tally: Tally, fuzz_gateway: Gateway) -> Iterator[Run]:
    """This test's run, added to the whole run's tally when it ends."""
    mine = Run(fuzz_gateway)
    yield mine
    run_tally.cases += mine.tally.cases
    run_tally.served += mine.tally.served
    for key, failure in mine.tally.failures.items():
        run_tally.failures.setdefault(key, failure)


@pytest.fixture(scope="module", autouse=True)
def ledger_verified(fuzz_gateway: Gateway) -> Iterator[None]:
    """Every request a module's fuzzers had served was charged exactly once: the ledger replays clean."""
    yield
    result = fuzz_gateway.cli("ledger", "verify", check=False)
    assert result.returncode == 0, f"ledger verify failed after fuzzing:\n{result.stdout}{result.stderr}"


@pytest.fixture
def ledger(fuzz_gateway: Gateway, fuzz_team: Team) -> Ledger:
    return Ledger(fuzz_gateway, fuzz_team.name)
