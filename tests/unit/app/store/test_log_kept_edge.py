"""The log writer keeps the right edge its last append left, and uses it only while the stored tree is
that edge's: after its own rolled-back append, after another writer's appends (even ones that bring the
log back to the size it kept), every stored root is still the RFC 6962 root of the committed leaves,
and proofs read from the stored tiles verify. On SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import Any

import psycopg
import pytest
from eventsourcing.persistence import StoredEvent

from app.store.database import Sql
from app.store.event_store import open_ledger_store
from app.store.log_append import LogWriter, stored_leaf
from app.store.log_reads import LogReads
from domain.transparency.verify import verify_inclusion
from tests.support.backend import new_database_url
from tests.unit.domain.transparency.rfc6962_reference import Reference

TEAM = uuid.UUID(int=7)


def events(first: int, count: int, tag: str = "") -> list[StoredEvent]:
    """``count`` events of one team from version ``first``; ``tag`` makes their leaves differ from
    another batch's at the same versions."""
    return [
        StoredEvent(TEAM, version, "test:Happened", f'{{"n":{version},"tag":"{tag}"}}'.encode())
        for version in range(first, first + count)
    ]


@pytest.fixture
def database(tmp_path):
    store = open_ledger_store(new_database_url(), tmp_path)  # migrated: the log's tables exist
    yield store.database
    store.close()


@contextmanager
def connection(database) -> Iterator[Any]:
    kind = database.kind
    raw = sqlite3.connect(database.path) if kind == "sqlite" else psycopg.connect(database.conninfo())
    with closing(raw):
        yield raw


def new_writer(database) -> LogWriter:
    postgres = database.kind == "postgresql"
    return LogWriter("%s" if postgres else "?", lock_rows=postgres)


def append(database, writer: LogWriter, batch: list[StoredEvent], *, commit: bool = True) -> None:
    with connection(database) as raw:
        cursor = raw.cursor()
        writer.append(cursor, batch)
        if commit:
            raw.commit()
        else:
            raw.rollback()


def check(database, committed: list[StoredEvent]) -> None:
    """The stored head is the committed leaves' tree, and inclusion proofs from the tiles verify."""
    entries = [stored_leaf(event) for event in committed]
    sql = Sql(database)
    try:
        reads = LogReads(sql)
        head = reads.head()
        assert head.size == len(committed)
        assert head.root == Reference(entries).root(head.size)
        for index in {0, head.size // 2, head.size - 1}:
            proof = reads.inclusion(index, head.size)
            verify_inclusion(index, head.size, reads.leaf_hash(index, head.size), proof, head.root)
    finally:
        sql.close()


def test_batches_across_a_full_tile_keep_the_root_right(database):
    writer, committed, version = new_writer(database), [], 1
    for count in (1, 3, 250, 7, 64, 1):  # 326 leaves: a full tile at level 0, then a partial one
        batch = events(version, count)
        append(database, writer, batch)
        committed += batch
        version += count
        check(database, committed)


def test_a_rolled_back_append_and_another_writer_s_appends_to_the_same_size_are_not_taken_for_the_kept_edge(
    database,
):
    ours, theirs = new_writer(database), new_writer(database)
    committed = events(1, 300)
    append(database, ours, committed)
    # Ours appends 5 leaves and is rolled back: it keeps an edge of 305 leaves the database never had.
    append(database, ours, events(301, 5, "rolled back"), commit=False)
    check(database, committed)
    # Theirs brings the log to 305 leaves with other bytes: the same size as ours kept, another root.
    theirs_batch = events(301, 5, "theirs")
    append(database, theirs, theirs_batch)
    committed += theirs_batch
    # Ours appends again: it must rebuild the edge from the stored tiles, not extend the one it kept.
    after = events(306, 20)
    append(database, ours, after)
    committed += after
    check(database, committed)
    # And theirs, whose kept edge is now behind by ours's 20.
    last = events(326, 2)
    append(database, theirs, last)
    check(database, committed + last)
