"""The writer lock across gateway processes (``app/store/writer_lock.py``) and the catch-up it
covers: each test's ledger is opened twice, as two processes would open it.

On PostgreSQL the lock is per team: a writer waits only for the teams another process is writing.
On SQLite it is one lock for the whole file (SQLite takes one writer at a time anyway).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import psycopg
import pytest

from app.ledger import turns
from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.store import writer_lock
from app.store.event_store import LedgerStore, open_ledger_store
from app.store.store_errors import VersionConflict
from app.store.writer_lock import WriterLock, team_key
from domain.ledger import InsufficientCredits, TeamLedger, team_id
from domain.ledger_holds import RequestOnLedger
from projections.audit import verify_ledger
from tests.support.backend import BACKEND, new_database_url


@pytest.fixture
def stores(tmp_path) -> Iterator[list[LedgerStore]]:
    url = new_database_url()
    opened = [open_ledger_store(url, tmp_path, pool_size=2) for _ in range(2)]
    yield opened
    for store in opened:
        store.close()


def hold(writer: LedgerWriter, team: str, request_id: str, amount: int = 1):
    return writer.on_team(
        team_id(team), team, lambda t: t.place_hold(RequestOnLedger(request_id, "k", "m", "chat"), amount)
    )


@contextmanager
def held_writer(writer: LedgerWriter, team: str) -> Iterator[None]:
    """Commands queued inside the block are decided together, in one batch, when it ends."""
    gate = threading.Event()
    blocker = writer.on_team(team_id(team), team, lambda t: gate.wait(10) and None)
    time.sleep(0.1)  # the writer thread has taken the blocker and waits in it
    try:
        yield
    finally:
        gate.set()
        blocker.result()


def test_a_team_locked_by_another_process_waits_for_it_and_other_teams_do_not(stores):
    writer = LedgerWriter(stores[0], lock=WriterLock(stores[0].database)).start()
    other = WriterLock(stores[1].database)  # another process, in the middle of a batch on team a
    try:
        service = LedgerService(writer)
        service.create_team("a", 1_000)
        service.create_team("b", 1_000)
        with other.held([team_id("a")]) as held:
            assert held
            to_a = hold(writer, "a", "ra")
            time.sleep(0.3)  # the writer has tried team a's lock, missed it, and now waits for it
            started = time.monotonic()
            to_b = [hold(writer, "b", f"rb{i}") for i in range(3)]
            if BACKEND == "postgresql":
                assert [f.result(timeout=5) for f in to_b] == [999, 998, 997]  # team b never waits for a
                assert time.monotonic() - started < 1.0
            time.sleep(0.3)
            assert not to_a.done()  # team a waits while the other process holds it
            if BACKEND == "sqlite":
                assert not any(f.done() for f in to_b)  # one lock for the whole file
        assert to_a.result(timeout=5) == 999
        assert [f.result(timeout=5) for f in to_b] == [999, 998, 997]
    finally:
        writer.stop()
        other.close()


def test_a_team_whose_lock_another_process_keeps_is_written_without_it_in_the_end(stores, monkeypatch):
    """A process stuck in the middle of a batch (alive, its lock held) cannot stop the others:
    after ``GIVE_UP`` seconds the team is written without the lock, optimistic concurrency still
    guarding the save."""
    if BACKEND != "postgresql":
        pytest.skip("SQLite's one lock is waited for: SQLite itself lets one writer in at a time")
    monkeypatch.setattr(turns, "GIVE_UP", 0.5)
    writer = LedgerWriter(stores[0], lock=WriterLock(stores[0].database)).start()
    other = WriterLock(stores[1].database)
    try:
        LedgerService(writer).create_team("a", 1_000)
        with other.held([team_id("a")]):
            started = time.monotonic()
            assert hold(writer, "a", "r1").result(timeout=5) == 999
            assert 0.5 <= time.monotonic() - started < 3
    finally:
        writer.stop()
        other.close()
    assert verify_ledger(stores[0]).ok


def test_the_lock_of_a_process_that_lost_its_connection_is_released(stores):
    """Session locks end with their session: a writer whose lock connection dies (its process
    killed, the network gone) leaves nobody waiting."""
    if BACKEND != "postgresql":
        pytest.skip("flock is released by the kernel when its process dies; PostgreSQL's lock by the server")
    writer = LedgerWriter(stores[0], lock=WriterLock(stores[0].database)).start()
    other = WriterLock(stores[1].database)
    try:
        LedgerService(writer).create_team("a", 1_000)
        with other.held([team_id("a")]):
            waiting = hold(writer, "a", "r1")
            time.sleep(0.3)
            assert not waiting.done()
            other._conn.close()  # the other process's connection is gone, its batch unfinished
            assert waiting.result(timeout=5) == 999
    finally:
        writer.stop()
        other.close()


def test_a_writer_whose_lock_connection_is_cut_goes_on_and_takes_the_lock_again(stores):
    """The server ends the writer lock's session (a restart, a network cut, an operator's
    ``pg_terminate_backend``): the batch in hand is written without the lock, and a second later
    the lock is taken on a new connection."""
    if BACKEND != "postgresql":
        pytest.skip("a flock has no connection to lose")
    lock = WriterLock(stores[0].database)
    writer = LedgerWriter(stores[0], lock=lock).start()
    try:
        LedgerService(writer).create_team("a", 1_000)
        assert hold(writer, "a", "r1").result(timeout=5) == 999
        first_session = lock._conn.info.backend_pid
        with psycopg.connect(stores[1].database.conninfo(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (first_session,))
        assert hold(writer, "a", "r2").result(timeout=5) == 998  # without the lock
        time.sleep(writer_lock.RETRY_AFTER + 0.1)
        assert hold(writer, "a", "r3").result(timeout=5) == 997
        assert lock._conn is not None
        assert lock._conn.info.backend_pid != first_session  # locked again, on a new session
    finally:
        writer.stop()
    assert verify_ledger(stores[0]).ok


def test_locks_are_taken_in_one_order_so_batches_sharing_teams_never_deadlock(stores):
    """Two locked writers whose batches hold many teams in common, each batch in its own order of
    arrival: every command is answered, no save refused, and the ledger checks out."""
    refused = [0]
    for store in stores:

        def counted(teams, idempotent=(), _save=store.save_teams):
            try:
                return _save(teams, idempotent)
            except VersionConflict:
                refused[0] += 1
                raise

        store.save_teams = counted  # type: ignore[method-assign]
    writers = [LedgerWriter(s, lock=WriterLock(s.database)).start() for s in stores]
    names = [f"t{i}" for i in range(12)]
    try:
        for name in names:
            LedgerService(writers[0]).create_team(name, 10_000)

        def one(i: int) -> str:
            # Writer 0 goes through the teams upwards, writer 1 downwards.
            team = names[i % len(names)] if i % 2 == 0 else names[-1 - i % len(names)]
            hold(writers[i % 2], team, f"r{i}", 2).result(timeout=30)
            return team

        with ThreadPoolExecutor(24) as pool:
            held_on = list(pool.map(one, range(1_200)))
    finally:
        for writer in writers:
            writer.stop()
    assert refused[0] == 0
    for name in names:
        team = stores[0].find_team(team_id(name))
        assert team.held == 2 * held_on.count(name)
    assert verify_ledger(stores[0]).ok


def test_one_query_catches_up_every_team_of_a_batch_with_what_another_process_wrote(stores):
    """Before deciding, a locked writer brings its copies of the batch's teams up to date with one
    query, whatever their number, and only the teams another process wrote move."""
    first = LedgerWriter(stores[0], lock=WriterLock(stores[0].database)).start()
    second = LedgerWriter(stores[1], lock=WriterLock(stores[1].database)).start()
    names = [f"t{i}" for i in range(20)]
    try:
        for name in [*names, "gate"]:
            LedgerService(first).create_team(name, 1_000)
        for name in [*names, "gate"]:  # the second process has every team loaded
            hold(second, name, f"warm-{name}").result()
        for name in names[:5]:  # the first process writes some of them: the second's copies are behind
            hold(first, name, f"first-{name}", 10).result()

        recorder = stores[1].recorder
        calls = {"newer": 0, "per_team": 0}
        newer, per_team = recorder.select_newer_events, recorder.select_events

        def count_newer(*args, **kwargs):
            calls["newer"] += 1
            return newer(*args, **kwargs)

        def count_per_team(*args, **kwargs):
            calls["per_team"] += 1
            return per_team(*args, **kwargs)

        recorder.select_newer_events = count_newer  # type: ignore[method-assign]
        recorder.select_events = count_per_team  # type: ignore[method-assign]
        with held_writer(second, "gate"):
            answers = [hold(second, name, f"second-{name}") for name in names]
        left = [a.result(timeout=10) for a in answers]
    finally:
        first.stop()
        second.stop()
    # Each hold saw the first process's holds on its team (1,000 − 1 warm-up − 10 − 1).
    assert left == [988] * 5 + [998] * 15
    assert calls["per_team"] == 0
    assert 1 <= calls["newer"] <= 2  # the gate's batch, then the batch of 20 teams: one query
    assert verify_ledger(stores[0]).ok


def test_leases_and_top_ups_written_by_others_are_seen_by_a_locked_writer(stores):
    """A process's lease, grown and given back, and a top-up by a command that takes no lock (the
    CLI), all reach the other process's copy of the team before it decides."""
    gateway = LedgerWriter(stores[0], lock=WriterLock(stores[0].database)).start()
    other = LedgerWriter(stores[1], lock=WriterLock(stores[1].database)).start()
    try:
        LedgerService(gateway).create_team("t", 100)
        tid = team_id("t")
        assert hold(gateway, "t", "r1", 10).result() == 90
        other_service = LedgerService(other)
        # 30 needed, and a quarter of the 60 available beyond that.
        assert other_service.lease(tid, "t", "lease-x", 30, 60, "other").result().remaining == 45
        assert hold(gateway, "t", "r2", 10).result() == 35  # 100 − 10 − 45 − 10
        with pytest.raises(InsufficientCredits):
            hold(gateway, "t", "r3", 40).result()
        other.on_team(tid, "t", lambda team: team.return_lease("lease-x")).result()
        assert hold(gateway, "t", "r3", 40).result() == 40
        with LedgerWriter(stores[1]) as cli:  # no lock, as `tollgate credits add` writes
            LedgerService(cli).top_up("t", 1_000)
        assert hold(gateway, "t", "r4", 1_000).result() == 40
    finally:
        gateway.stop()
        other.stop()
    team: TeamLedger = stores[0].find_team(tid)
    assert (team.balance, team.held) == (1_100, 1_060)
    assert verify_ledger(stores[0]).ok


def test_team_keys_spread_and_fit_in_a_postgresql_int4():
    keys = {team_key(team_id(f"team-{i}")) for i in range(10_000)}
    assert len(keys) > 9_980  # 32 bits: a collision only makes two teams share a lock
    assert all(-(2**31) <= k < 2**31 for k in keys)
