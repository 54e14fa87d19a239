"""``ledger verify``'s check of the transparency log (``projections/log_check.py``), on SQLite and
PostgreSQL: a ledger as written verifies, leaf for event, with every kept checkpoint; each way of
tampering with the events or the log is a problem that names it; events written while the check
reads are no problem."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from eventsourcing.persistence import StoredEvent

from app.ledger.log_checkpoints import sign_now
from app.store.database import Sql
from app.store.event_store import LedgerStore, open_ledger_store
from app.store.log_append import UNREADABLE_INSTANT, stored_leaf
from app.store.log_reads import KeptCheckpoint, LogReads
from domain.ledger import TeamLedger, team_id
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.transparency.checkpoint import Checkpoint, sign_checkpoint
from domain.transparency.event_leaf import event_leaf
from domain.transparency.keys import signer_from_seed
from domain.usage import TokenUsage
from projections.audit import verify_ledger
from projections.log_check import LogCheck
from tests.support.backend import RawDatabase, new_database_url

PRICE = Price(input=Decimal(1), output=Decimal(2), cache_create=Decimal(0), cache_hit=Decimal(0))
SIGNER = signer_from_seed("log.example/check", bytes(range(32)))


@pytest.fixture
def ledger(tmp_path) -> tuple[LedgerStore, RawDatabase]:
    url = new_database_url()
    store = open_ledger_store(url, tmp_path)
    yield store, RawDatabase(url, tmp_path)
    store.close()


def spend(store: LedgerStore, name: str, requests: int) -> None:
    team = TeamLedger.open(name)
    team.add_credits(10_000_000, "opening")
    store.save_teams([team])
    for i in range(requests):
        request = RequestOnLedger(f"{name}-r{i}", "k", "m", "chat")
        team.place_hold(request, 1_000)
        team.charge(request, TokenUsage(10, 20), PRICE, Decimal(100))
        store.save_teams([team])


def sign(store: LedgerStore) -> KeptCheckpoint | None:
    sql = Sql(store.database)
    try:
        return sign_now(LogReads(sql), SIGNER)
    finally:
        sql.close()


def problems(store: LedgerStore) -> list[str]:
    return [p for p in verify_ledger(store).problems if p.startswith("transparency log:")]


def test_a_ledger_as_written_verifies_leaf_for_event_with_every_kept_checkpoint(ledger):
    store, _ = ledger
    spend(store, "acme", 5)
    assert sign(store) is not None
    spend(store, "zeta", 300)  # past a full tile of 256 leaves
    assert sign(store) is not None
    report = verify_ledger(store)
    assert report.ok, report.problems
    assert report.log_leaves == report.events == 2 + 5 * 2 + 2 + 300 * 2
    assert report.log_checkpoints == 2


def test_an_event_changed_after_it_was_logged_is_named(ledger):
    store, raw = ledger
    spend(store, "acme", 4)
    (event_id, state), *_ = raw.events("Charged")
    record = json.loads(state)
    record["charged"] -= 1
    raw.set_event_state(event_id, json.dumps(record, separators=(",", ":")).encode())
    found = problems(store)  # the replay stops at it (its balance no longer adds up): the log is checked that far
    assert found == [
        f"transparency log: leaf 3 (event 4 of {team_id('acme')}) is not the stored event: changed after it was logged",
        "transparency log: the log's tree of 4 leaves is not the tree of the events",
    ]


def test_the_newest_events_deleted_are_named(ledger):
    store, raw = ledger
    spend(store, "acme", 3)
    *_, (last, _) = raw.events("")
    raw.delete_event(last)
    gone = f"leaf 7 (event 8 of {team_id('acme')}) is no longer stored"
    assert problems(store) == [f"transparency log: the log has 8 leaves, the events stop at 7: {gone}"]


def test_a_checkpoint_no_tree_of_its_size_has_and_a_rewritten_root_are_named(ledger):
    store, raw = ledger
    spend(store, "acme", 3)
    forged = sign_checkpoint(Checkpoint(SIGNER.name, 4, bytes(32)), SIGNER).decode()
    raw.execute(
        "INSERT INTO log_checkpoints (size, root, note, signed_at) VALUES (?, ?, ?, ?)",
        (4, bytes(32), forged, datetime.now(UTC).isoformat()),
    )
    raw.execute("UPDATE log_state SET root = ?", (bytes(32),))
    found = problems(store)
    assert len(found) == 2, found
    assert found[0].startswith("transparency log: the checkpoint of 4 leaves states root 0000000000000000…")
    assert found[1] == "transparency log: the log's stored root at 8 leaves is not the root of its events"


def test_events_written_while_the_check_reads_are_leaves_checked_too(ledger):
    store, _ = ledger
    spend(store, "acme", 2)
    sign(store)
    check = LogCheck(store)  # the log's size and checkpoints read now, at 6 leaves
    spend(store, "zeta", 2)
    sign(store)  # a checkpoint beyond what the check read: not its concern
    for notification in store.notifications():
        check.expect(notification)
    assert check.finish() == []
    assert (check.leaves, check.checkpoints) == (12, 1)


def test_a_state_the_leaf_cannot_read_is_logged_as_its_bytes_at_the_epoch():
    state = b'{"not":"an event"}'
    stored = StoredEvent("6ba7b810-9dad-11d1-80b4-00c04fd430c8", 3, "domain.ledger:TeamLedger.Odd", state)
    assert stored_leaf(stored) == event_leaf(
        "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
        3,
        "domain.ledger:TeamLedger.Odd",
        UNREADABLE_INSTANT,
        {"state_hex": state.hex()},
    )
    assert stored_leaf(StoredEvent(stored.originator_id, 3, stored.topic, b"\xff")) != stored_leaf(stored)
