"""The writer loads teams beside its thread: snapshots are taken as the team's history grows, so the
next process loads it from the newest one, and a team that does not exist stalls nothing. (That a
team with a long history never delays another team's commands is a scale test:
tests/scale/test_long_team_loading.py.)"""

from __future__ import annotations

import itertools

import pytest

from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.store.event_store import open_ledger_store
from app.store.snapshots import same_state
from domain.ledger import team_id
from tests.support.backend import new_database_url


@pytest.fixture
def store(tmp_path):
    opened = open_ledger_store(new_database_url(), tmp_path, pool_size=4)
    yield opened
    opened.close()


def test_the_writer_snapshots_a_team_as_its_history_grows(store):
    with LedgerWriter(store, snapshot_every=10) as writer:
        ledger = LedgerService(writer)
        ledger.create_team("acme", 100)
        for _ in range(35):
            ledger.top_up("acme", 1)
    versions = store.team_snapshots.versions(team_id("acme"), 0)
    assert len(versions) == 3
    assert all(later - earlier >= 10 for earlier, later in itertools.pairwise(versions))
    loaded, used = store.load_team(team_id("acme"))
    assert used == versions[-1]
    replayed = None
    for event in store.events_after(team_id("acme"), 0):
        replayed = event.mutate(replayed)
    assert same_state(loaded, replayed)
    with LedgerWriter(store, snapshot_every=10) as writer:  # the next process: from the newest snapshot on
        assert LedgerService(writer).top_up("acme", 1).balance == 136
    assert len(store.team_snapshots.versions(team_id("acme"), 0)) == 3  # 2 events since: none due yet


def test_a_command_for_a_team_that_does_not_exist_is_refused_without_stalling(store):
    from domain.ledger import TeamNotFound

    with LedgerWriter(store) as writer:
        with pytest.raises(TeamNotFound):
            writer.on_team(team_id("ghost"), "ghost", lambda t: t.add_credits(1)).result(timeout=10)
        LedgerService(writer).create_team("ghost", 5)
        assert writer.on_team(team_id("ghost"), "ghost", lambda t: t.add_credits(1)).result(timeout=10) == 5 + 1
