"""The writer loads teams beside its thread: a team with a long history (40,000 events, most of a
second to replay) never delays another team's commands, and commands for a team still loading wait
for it in order. A scale test: the history takes seconds to write (tests/unit/app/ledger/
test_team_loading.py has the rest of the writer's loading)."""

from __future__ import annotations

import statistics
import time
from decimal import Decimal

import pytest

from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.store.event_store import LedgerStore, open_ledger_store
from domain.ledger import TeamLedger, team_id
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.usage import TokenUsage
from tests.support.backend import new_database_url

PRICE = Price(Decimal(1), Decimal(2), Decimal("1.25"), Decimal("0.1"))
PER_USD = Decimal(100)


@pytest.fixture
def store(tmp_path):
    opened = open_ledger_store(new_database_url(), tmp_path, pool_size=4)
    yield opened
    opened.close()


def _long_history(store: LedgerStore, name: str, requests: int) -> None:
    """A team with ``requests`` held and charged requests, recorded without snapshots (as an
    upgraded ledger has it): loading it replays every event."""
    team = TeamLedger.open(name)
    team.add_credits(10**12)
    for i in range(requests):
        team.place_hold(RequestOnLedger(f"r{i}", "k", "m", "chat"), 1_000)
        team.charge(RequestOnLedger(f"r{i}", "k", "m", "chat"), TokenUsage(10, 5), PRICE, PER_USD)
        if len(team.pending_events) >= 4_000:
            store.save_teams([team])
    store.save_teams([team])


def test_a_team_with_a_long_history_loading_does_not_delay_another_team(store):
    _long_history(store, "big", 20_000)  # 40,002 events: most of a second to replay
    with LedgerWriter(store, snapshot_every=None) as writer:
        small = LedgerService(writer)
        small.create_team("small", 1_000)
        started = time.perf_counter()
        first = writer.on_team(
            team_id("big"), "big", lambda t: t.place_hold(RequestOnLedger("x1", "k", "m", "chat"), 1)
        )
        then = [
            writer.on_team(
                team_id("big"), "big", lambda t, i=i: t.place_hold(RequestOnLedger(f"x{i}", "k", "m", "chat"), 1)
            )
            for i in (2, 3)
        ]
        waits = []
        while not first.done():
            asked = time.perf_counter()
            small.top_up("small", 1)
            waits.append(time.perf_counter() - asked)
        big_wait = time.perf_counter() - started
        available = [first.result(), *(f.result() for f in then)]
    assert big_wait > 0.3, "the history is too short to measure anything"
    assert len(waits) >= 5
    # served while the big team loaded: most top-ups at once, none behind the whole load (on a shared
    # 2-core machine one may wait for the CPU a while; queued behind the load, every one would)
    assert statistics.median(waits) < big_wait / 10, (statistics.median(waits), big_wait)
    assert max(waits) < big_wait / 2, (max(waits), big_wait)
    assert available == sorted(available, reverse=True)  # its own commands waited for it, in order
    assert available[0] - available[2] == 2
