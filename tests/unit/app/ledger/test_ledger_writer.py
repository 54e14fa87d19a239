"""The single writer under contention: two writers (as two processes would) on one ledger."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.store.event_store import open_ledger_store
from app.store.store_errors import VersionConflict
from app.store.writer_lock import WriterLock
from domain.ledger import InsufficientCredits, team_id
from domain.ledger_holds import RequestOnLedger
from projections.audit import verify_ledger
from tests.support.backend import new_database_url


@pytest.fixture
def stores(tmp_path):
    url = new_database_url()
    opened = [open_ledger_store(url, tmp_path) for _ in range(2)]
    yield opened
    for store in opened:
        store.close()


def test_two_writers_on_one_team_never_reserve_more_than_the_balance(stores):
    first, second = (LedgerWriter(s).start() for s in stores)
    try:
        LedgerService(first).create_team("hot", 1_000)
        tid = team_id("hot")

        def hold(i: int) -> bool:
            writer = first if i % 2 else second
            try:
                writer.on_team(
                    tid, "hot", lambda t: t.place_hold(RequestOnLedger(f"r{i}", "k", "m", "chat"), 7)
                ).result()
                return True
            except InsufficientCredits:
                return False

        with ThreadPoolExecutor(16) as pool:
            granted = sum(pool.map(hold, range(400)))
        assert granted == 1_000 // 7  # exactly what the balance covers, whichever writer won each race
    finally:
        first.stop()
        second.stop()
    team = stores[0].find_team(tid)
    assert team.held == 7 * granted
    assert team.available >= 0
    assert verify_ledger(stores[0]).ok


def test_credits_added_by_another_writer_are_seen_before_refusing(stores):
    first, second = (LedgerWriter(s).start() for s in stores)
    try:
        LedgerService(first).create_team("t", 10)
        tid = team_id("t")
        first.on_team(tid, "t", lambda t: t.place_hold(RequestOnLedger("r1", "k", "m", "chat"), 10)).result()
        LedgerService(second).top_up("t", 50)
        assert (
            first.on_team(tid, "t", lambda t: t.place_hold(RequestOnLedger("r2", "k", "m", "chat"), 50)).result() == 0
        )
    finally:
        first.stop()
        second.stop()


def test_a_batch_gives_each_caller_the_state_right_after_its_own_command(stores):
    writer = LedgerWriter(stores[0]).start()
    try:
        LedgerService(writer).create_team("t", 100)
        tid = team_id("t")
        futures = [
            writer.on_team(tid, "t", lambda t, i=i: t.place_hold(RequestOnLedger(f"r{i}", "k", "m", "chat"), 10))
            for i in range(10)
        ]
        assert sorted(f.result() for f in futures) == list(range(0, 100, 10))
    finally:
        writer.stop()


def test_a_writer_that_lost_a_race_catches_up_without_replaying_the_team(stores):
    """Every save of a stale copy conflicts; the loser applies only the newer events to its copy,
    so a conflict costs the same on a team with a long history as on a new one."""
    loads = [0, 0]
    for i, store in enumerate(stores):

        def counted(team_id, *args, _load=store.load_team, _i=i, **kwargs):
            loads[_i] += 1
            return _load(team_id, *args, **kwargs)

        store.load_team = counted  # type: ignore[method-assign]
    first, second = (LedgerWriter(s).start() for s in stores)
    try:
        LedgerService(first).create_team("old", 1_000)
        tid = team_id("old")
        for _ in range(50):  # some history
            LedgerService(first).top_up("old", 1)
        for i in range(40):  # each writer's copy is stale every time: it conflicts, then catches up
            writer = (first, second)[i % 2]
            assert writer.on_team(
                tid, "old", lambda t, i=i: t.place_hold(RequestOnLedger(f"r{i}", "k", "m", "chat"), 10)
            ).result() == 1_050 - 10 * (i + 1)
    finally:
        first.stop()
        second.stop()
    assert loads[1] == 1  # its first sight of the team; never again
    assert loads[0] <= 1
    team = stores[0].find_team(tid)
    assert (team.balance, team.held) == (1_050, 400)
    assert verify_ledger(stores[0]).ok


def test_writers_that_take_the_writer_lock_never_have_a_save_refused(stores):
    """Two gateway processes on one busy team (--workers 2): with the lock each writer catches up,
    decides and saves in turn, so no save is refused and no batch decided twice."""
    refused = [0]
    for store in stores:

        def counted(teams, idempotent=(), _save=store.save_teams):
            try:
                return _save(teams, idempotent)
            except VersionConflict:
                refused[0] += 1
                raise

        store.save_teams = counted  # type: ignore[method-assign]
    first, second = (LedgerWriter(s, lock=WriterLock(s.database)).start() for s in stores)
    try:
        LedgerService(first).create_team("busy", 10_000)
        tid = team_id("busy")

        def hold(i: int) -> int:
            writer = first if i % 2 else second
            return writer.on_team(
                tid, "busy", lambda t: t.place_hold(RequestOnLedger(f"r{i}", "k", "m", "chat"), 3)
            ).result()

        with ThreadPoolExecutor(16) as pool:
            left = list(pool.map(hold, range(600)))
    finally:
        first.stop()
        second.stop()
    assert refused[0] == 0
    assert sorted(left) == [10_000 - 3 * n for n in range(600, 0, -1)]  # each hold saw all before it
    assert verify_ledger(stores[0]).ok
