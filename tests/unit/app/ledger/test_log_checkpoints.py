"""Signing the transparency log's checkpoints (``app/ledger/log_checkpoints.py``), on SQLite and
PostgreSQL: a checkpoint only when the log grew and the latest is due; one process at a time, so
that two signers together sign no more often than one; the last events in a checkpoint once stopped."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import psycopg
import pytest

from app.ledger.log_checkpoints import DUE, CheckpointSigner, sign_now
from app.store.database import Sql
from app.store.event_store import LedgerStore, open_ledger_store
from app.store.log_reads import CHECKPOINT_LOCK, LogReads
from domain.ledger import TeamLedger
from domain.transparency.checkpoint import open_checkpoint
from domain.transparency.keys import signer_from_seed
from tests.support.backend import new_database_url

SIGNER = signer_from_seed("log.example/sign", bytes(range(32)))
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path) -> Iterator[LedgerStore]:
    opened = open_ledger_store(new_database_url(), tmp_path)
    yield opened
    opened.close()


@contextmanager
def log_of(store: LedgerStore) -> Iterator[LogReads]:
    sql = Sql(store.database)
    try:
        yield LogReads(sql)
    finally:
        sql.close()


def grow(store: LedgerStore, name: str) -> None:
    team = TeamLedger.open(name)
    team.add_credits(1_000, "opening")
    store.save_teams([team])


def test_a_checkpoint_when_the_log_grew_and_the_latest_is_due(store):
    with log_of(store) as reads:
        first = sign_now(reads, SIGNER, 10.0, now=T0)  # the empty log's, none being kept yet
        assert first is not None
        assert first.size == 0
        assert sign_now(reads, SIGNER, 10.0, now=T0 + timedelta(seconds=60)) is None  # not grown
        grow(store, "acme")
        assert sign_now(reads, SIGNER, 10.0, now=T0 + timedelta(seconds=DUE * 10 - 0.1)) is None  # not due
        kept = sign_now(reads, SIGNER, 10.0, now=T0 + timedelta(seconds=DUE * 10))
        assert kept is not None
        assert kept.size == 2
        assert open_checkpoint(kept.note.encode(), SIGNER.name, [SIGNER.verifier]).root_hash == reads.head().root
        grow(store, "zeta")
        # the latest signed by a process whose clock is ahead: never a reason to stop signing
        assert sign_now(reads, SIGNER, 10.0, now=T0) is not None
        assert [k.size for k in reads.all_checkpoints()] == [0, 2, 4]


def test_a_process_that_finds_another_signing_signs_nothing_this_time(store):
    if store.database.kind == "sqlite":
        pytest.skip("SQLite's write lock is waited for, as every writer waits for it")
    grow(store, "acme")
    with psycopg.connect(store.database.conninfo()) as other, log_of(store) as reads:
        other.execute("SELECT pg_advisory_xact_lock(%s)", (CHECKPOINT_LOCK,))  # another process's turn
        assert sign_now(reads, SIGNER) is None
        other.commit()
        assert sign_now(reads, SIGNER) is not None


def test_two_signers_take_turns_and_the_last_events_are_signed_once_stopped(store):
    every = 0.1
    signers = [CheckpointSigner(store.database, SIGNER, every).start() for _ in range(2)]
    stop = threading.Event()

    def write() -> None:
        for i in range(10_000):
            if stop.is_set():
                return
            grow(store, f"team-{i}")
            time.sleep(0.005)

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(1.5)
    stop.set()
    writer.join()
    for signer in signers:
        signer.stop()
    with log_of(store) as reads:
        kept = reads.all_checkpoints()
        head = reads.head()
    assert kept[-1].size == head.size > 0
    assert len(kept) >= 3
    signed = [datetime.fromisoformat(k.signed_at) for k in kept]
    spacing = [(later - earlier).total_seconds() for earlier, later in pairwise(signed)]
    # in turn, each after the one before it, never sooner than due (but the last, signed when stopping)
    assert min(spacing[:-1]) >= DUE * every, spacing
    assert [k.size for k in kept] == sorted({k.size for k in kept})
