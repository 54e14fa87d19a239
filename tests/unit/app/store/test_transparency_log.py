"""The transparency log in the ledger's database, on SQLite and PostgreSQL: every stored event is a
leaf, appended in the event's own transaction; the stored root is the root the tests' own RFC 6962
implementation computes from the events' leaves; two writers racing never fork it; proofs from the
stored tiles verify; a ledger that had events before the log gets them all appended."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from decimal import Decimal

import psycopg
import pytest

from app.ledger.writer import LedgerWriter
from app.store.database import Sql
from app.store.event_store import open_ledger_store
from app.store.log_append import stored_leaf
from app.store.log_catch_up import catch_up_log
from app.store.log_reads import LogReads
from domain.ledger import TeamLedger, team_id
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.transparency.verify import verify_consistency, verify_inclusion
from domain.usage import TokenUsage
from tests.support.backend import new_database_url
from tests.unit.domain.transparency.rfc6962_reference import Reference

PRICE = Price(input=Decimal(1), output=Decimal(2), cache_create=Decimal(0), cache_hit=Decimal(0))


@pytest.fixture
def stores(tmp_path):
    url = new_database_url()
    opened = [open_ledger_store(url, tmp_path) for _ in range(2)]
    yield opened
    for store in opened:
        store.close()


@contextmanager
def log_of(store) -> Iterator[LogReads]:
    sql = Sql(store.database)
    try:
        yield LogReads(sql)
    finally:
        sql.close()


def logged_entries(store) -> list[bytes]:
    """Every leaf's bytes, in leaf order, recomputed from the stored event it names."""
    with log_of(store) as reads:
        leaves = reads.events(0, reads.head().size)
    entries = []
    for _, originator, version in leaves:
        (stored,) = store.recorder.select_events(originator, gt=version - 1, lte=version)
        entries.append(stored_leaf(stored))
    return entries


def spend(store, name: str, requests: int) -> None:
    team = TeamLedger.open(name)
    team.add_credits(10_000_000, "opening")
    store.save_teams([team])
    for i in range(requests):
        request = RequestOnLedger(f"{name}-r{i}", "k", "m", "chat")
        team.place_hold(request, 1_000)
        team.charge(request, TokenUsage(10, 20), PRICE, Decimal(100))
        store.save_teams([team])


def test_every_event_is_a_leaf_and_the_stored_root_is_the_rfc_6962_root_of_them(stores):
    store = stores[0]
    spend(store, "acme", 40)
    spend(store, "zeta", 3)
    with log_of(store) as reads:
        check_the_stored_log(store, reads)


def check_the_stored_log(store, reads: LogReads) -> None:
    head = reads.head()
    events = sum(1 for _ in store.recorder.select_notifications(0, 10_000))
    assert head.size == events == 2 * 2 + 40 * 2 + 3 * 2
    entries = logged_entries(store)
    reference = Reference(entries)
    assert head.root == reference.root(head.size)
    for index in (0, 17, head.size - 1):
        verify_inclusion(
            index, head.size, reads.leaf_hash(index, head.size), reads.inclusion(index, head.size), head.root
        )
    verify_consistency(30, head.size, reference.root(30), head.root, reads.consistency(30, head.size))
    assert reads.root_at(30) == reference.root(30)
    charged = store.find_charge(team_id("acme"), "acme-r7")
    assert reads.leaf_of(team_id("acme"), charged.version) is not None


def test_two_writers_racing_on_one_team_never_fork_the_log(stores):
    writers = [LedgerWriter(s).start() for s in stores]
    try:
        team = TeamLedger.open("hot")
        team.add_credits(10_000_000, "opening")
        stores[0].save_teams([team])
        tid = team_id("hot")

        def hold(i: int) -> None:
            request = RequestOnLedger(f"r{i}", "k", "m", "chat")
            writers[i % 2].on_team(tid, "hot", lambda t: t.place_hold(request, 7)).result()

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(hold, range(120)))
    finally:
        for writer in writers:
            writer.stop()
    with log_of(stores[0]) as reads:
        head = reads.head()
        indexes = [i for i, _, _ in reads.events(0, head.size)]
    assert head.size == 2 + 120
    assert head.root == Reference(logged_entries(stores[0])).root(head.size)
    assert indexes == list(range(head.size))  # no gap, no leaf twice


def test_a_ledger_with_events_before_the_log_gets_them_all(stores):
    store = stores[0]
    spend(store, "old", 5)
    with log_of(store) as reads:
        before = reads.head()
    sql = Sql(store.database)
    with sql.transaction() as tx:  # as a ledger written before migration 0021 has it
        for table in ("log_leaves", "log_tiles", "log_state"):
            tx.execute(f"DELETE FROM {table}")
    sql.close()
    kind = store.database.kind
    raw = sqlite3.connect(store.database.path) if kind == "sqlite" else psycopg.connect(store.database.conninfo())
    with closing(raw):
        assert catch_up_log(raw, kind, page=3) == before.size
        raw.commit()
    with log_of(store) as reads:
        assert reads.head() == before
