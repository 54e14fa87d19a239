"""A team loaded from a snapshot is the team its events make: snapshots are a cache, never the truth.

Random command sequences are recorded through the store, with snapshots taken at random points;
loading the team (now, at any version, at any instant) must give exactly what a full replay of its
events gives. A corrupt snapshot, or one that lies, is ignored by the load and costs only time.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.store.event_store import LedgerStore, open_ledger_store
from app.store.snapshots import same_state
from domain.credit_lots import PROMOTIONAL, LotTerms
from domain.ledger import LedgerError, TeamLedger, team_id
from domain.ledger_holds import RequestOnLedger
from domain.ledger_payments import PaymentFacts, Reversal
from domain.pricing import Price
from domain.usage import TokenUsage
from tests.support.backend import RawDatabase, new_database_url

PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))
PER_USD = Decimal(100)

OPS = st.one_of(
    st.tuples(st.just("top_up"), st.integers(1, 10_000)),
    st.tuples(st.just("hold"), st.integers(0, 3_000)),
    st.tuples(st.just("charge"), st.integers(0, 5), st.integers(0, 400)),
    st.tuples(st.just("release"), st.integers(0, 5)),
    st.tuples(st.just("lease"), st.integers(1, 2_000), st.integers(1, 8_000)),
    st.tuples(st.just("lease_charge"), st.integers(0, 300)),
    st.tuples(st.just("return_lease")),
    st.tuples(st.just("key"), st.integers(0, 3)),
    st.tuples(st.just("revoke"), st.integers(0, 3)),
    st.tuples(st.just("limit"), st.integers(0, 100)),
    st.tuples(st.just("suspend")),
    st.tuples(st.just("reinstate")),
    st.tuples(st.just("expire")),
    st.tuples(st.just("snapshot")),
    st.tuples(st.just("lot"), st.integers(1, 5_000), st.integers(0, 100), st.integers(1, 3)),
    st.tuples(st.just("pay"), st.integers(0, 2), st.integers(1, 5_000)),
    st.tuples(st.just("refund"), st.integers(0, 2), st.integers(1, 8_000)),
    st.tuples(st.just("dispute"), st.integers(0, 2), st.integers(1, 8_000), st.booleans()),
    st.tuples(st.just("recharge"), st.integers(0, 1)),
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerStore]:
    base = tmp_path_factory.mktemp("snapshots")
    opened = open_ledger_store(new_database_url(), base, pool_size=2)
    yield opened
    opened.close()


def _pick(team: TeamLedger, index: object) -> str:
    holds = sorted(h for h in team.holds if h.startswith("r"))
    if not holds:
        raise LedgerError("no open hold")
    return holds[int(index) % len(holds)]  # type: ignore[call-overload]


_COMMANDS = {
    "top_up": lambda t, op, step: t.add_credits(op[1], f"ref{step}"),
    "hold": lambda t, op, step: t.place_hold(RequestOnLedger(f"r{step}", "k0", "m", "chat"), op[1], owner="p1"),
    "charge": lambda t, op, step: t.charge(
        RequestOnLedger(_pick(t, op[1]), "k0", "m", "chat"), TokenUsage(op[2], op[2] // 2), PRICE, PER_USD
    ),
    "release": lambda t, op, step: t.release_hold(_pick(t, op[1]), "upstream failed"),
    "lease": lambda t, op, step: t.lease_credits("L1", op[1], op[1] + op[2], owner="p1"),
    "lease_charge": lambda t, op, step: (
        "L1" in t.holds
        and t.charge(RequestOnLedger(f"q{step}", "k0", "m", "chat"), TokenUsage(op[1], 1), PRICE, PER_USD, lease="L1")
    ),
    "return_lease": lambda t, op, step: t.return_lease("L1"),
    "key": lambda t, op, step: t.issue_key(f"k{op[1]}", f"hash{op[1]}", "label"),
    "revoke": lambda t, op, step: t.revoke_key(f"k{op[1]}"),
    "limit": lambda t, op, step: t.limit(op[1], None),
    "suspend": lambda t, op, step: t.suspend("why"),
    "reinstate": lambda t, op, step: t.reinstate(),
    "expire": lambda t, op, step: t.release_expired(now=t.modified_on.timestamp() + 10, timeout=0),
    "lot": lambda t, op, step: t.add_credits(
        op[1], "lot", terms=LotTerms(PROMOTIONAL, t.now() + timedelta(days=op[3]), op[2])
    ),
    "pay": lambda t, op, step: t.credit_payment(PaymentFacts(f"pi_{op[1]}", op[2], recharge=_pending(t))),
    "refund": lambda t, op, step: t.refund_payment(Reversal(f"re_{step}", f"pi_{op[1]}", op[2])),
    "dispute": lambda t, op, step: (
        t.open_dispute(Reversal(f"dp_{step}", f"pi_{op[1]}", op[2]))
        and t.close_dispute(f"dp_{step}", f"pi_{op[1]}", won=op[3])
    ),
    "recharge": lambda t, op, step: (
        t.set_auto_recharge(1_000, 6_000, 20_000)
        if op[1]
        else t.begin_recharge() and t.recharge_failed(_pending(t), "card_declined")
    ),
}


def _pending(team: TeamLedger) -> str:
    return team.recharge.pending if team.recharge is not None else ""


def _apply(team: TeamLedger, op: tuple[Any, ...], step: int) -> None:
    """One command on the team; a refusal records nothing (as in the gateway)."""
    with contextlib.suppress(LedgerError):
        _COMMANDS[op[0]](team, op, step)


def _replayed(store: LedgerStore, tid: uuid.UUID, upto: int | None = None) -> TeamLedger | None:
    team = None
    for event in store.events_after(tid, 0, upto=upto, page=7):  # small pages: the paging is exercised too
        team = event.mutate(team)
    return team


def _record(store: LedgerStore, ops: list[tuple[object, ...]]) -> tuple[uuid.UUID, list[int]]:
    """The ops recorded on a new team, one save each; the versions snapshotted."""
    name = f"t{uuid.uuid4().hex[:10]}"
    team = TeamLedger.open(name)
    team.add_credits(5_000)
    store.save_teams([team])
    snapshotted = []
    for step, op in enumerate(ops):
        if op[0] == "snapshot":
            store.team_snapshots.save([store.team_snapshots.take(team)])
            snapshotted.append(team.version)
            continue
        _apply(team, op, step)
        store.save_teams([team])
    return team_id(name), snapshotted


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=1, max_size=40), probes=st.lists(st.integers(1, 200), max_size=4))
def test_a_team_loaded_from_its_snapshots_is_the_team_its_events_make(store, ops, probes):
    tid, snapshotted = _record(store, ops)
    full = _replayed(store, tid)
    loaded, snapshot_version = store.load_team(tid)
    assert same_state(loaded, full)
    assert snapshot_version == (max(snapshotted) if snapshotted else 0)
    for version in {*snapshotted, *(min(p, full.version) for p in probes)}:
        at_version, _ = store.load_team(tid, version)
        assert same_state(at_version, _replayed(store, tid, version)), version


def test_the_team_at_every_instant_is_the_team_its_events_up_to_then_make(store):
    """Point-in-time reads: at each event's own time, exactly the events recorded by then."""
    ops = [
        ("top_up", 100),
        ("hold", 500),
        ("snapshot",),
        ("charge", 0, 40),
        ("key", 1),
        ("hold", 20),
        ("snapshot",),
        ("release", 0),
        ("lease", 100, 900),
        ("lease_charge", 30),
        ("snapshot",),
        ("return_lease",),
        ("top_up", 7),
    ]
    tid, _ = _record(store, ops)
    events = list(store.events_after(tid, 0))
    first = events[0].timestamp
    assert store.load_team(tid, at=first - timedelta(microseconds=1))[0] is None  # not opened yet
    for event in events:
        at_instant, _ = store.load_team(tid, at=event.timestamp)
        expected = _replayed(store, tid, max(e.originator_version for e in events if e.timestamp <= event.timestamp))
        assert same_state(at_instant, expected), event.originator_version
    assert same_state(store.load_team(tid, at=events[-1].timestamp + timedelta(days=1))[0], _replayed(store, tid))


def _raw(store: LedgerStore) -> RawDatabase:
    raw = RawDatabase.__new__(RawDatabase)
    raw.db = store.database
    return raw


def test_a_corrupt_snapshot_is_ignored_and_costs_only_time(store, caplog):
    tid, snapshotted = _record(store, [("top_up", 5), ("hold", 300), ("snapshot",), ("charge", 0, 100), ("top_up", 9)])
    raw = _raw(store)
    raw.execute(
        "UPDATE team_snapshots SET state = ? WHERE team_id = ? AND version = ?", (b"{not json", tid.hex, snapshotted[0])
    )
    loaded, used = store.load_team(tid)
    assert used == 0
    assert same_state(loaded, _replayed(store, tid))
    assert "fails its digest" in caplog.text


def test_a_snapshot_that_lies_with_a_valid_digest_is_caught_by_the_balances_read_model(store, caplog):
    """Rewritten by someone who knew the digest: the team it gives disagrees with the balances read
    model (written with the events), so the load replays the events instead."""
    tid, _ = _record(store, [("top_up", 5), ("snapshot",)])
    real, _ = store.load_team(tid)
    forged = real.fork()
    forged.balance += 1_000_000
    row = store.team_snapshots.take(forged)
    store.team_snapshots.replace([row])
    loaded, used = store.load_team(tid)
    assert used == 0
    assert loaded.balance == real.balance
    assert same_state(loaded, _replayed(store, tid))
    assert "disagrees with the balances read model" in caplog.text


def test_a_team_without_snapshots_loads_from_its_events(store):
    tid, _ = _record(store, [("top_up", 5), ("snapshot",), ("hold", 100), ("snapshot",)])
    _raw(store).execute("DELETE FROM team_snapshots WHERE team_id = ?", (tid.hex,))
    loaded, used = store.load_team(tid)
    assert used == 0
    assert same_state(loaded, _replayed(store, tid))


def test_a_snapshot_taken_before_the_team_gained_some_state_is_passed_over(store, caplog):
    """A later version of the aggregate may keep more state; a snapshot without it cannot stand in
    for the events (which know it), so the team is replayed instead."""
    caplog.set_level(logging.INFO, "tollgate.snapshots")
    tid, _ = _record(store, [("top_up", 5), ("key", 1)])
    older = store.load_team(tid)[0].fork()
    del older.__dict__["tpm"]  # as if taken before the team had a tokens-per-minute limit
    store.team_snapshots.save([store.team_snapshots.take(older)])
    loaded, used = store.load_team(tid)
    assert used == 0
    assert same_state(loaded, _replayed(store, tid))
    assert "predates tpm" in caplog.text


def test_a_snapshot_of_the_state_before_pricing_policies_is_upcast_not_passed_over(store, monkeypatch):
    """Snapshots taken before teams had price adjustments, an output clamp and adjustment references
    (class_version 1) are read with none of them, which is what the team had then: a million-event
    team upgraded still loads from its snapshot, not by replaying its history."""
    tid, _ = _record(store, [("top_up", 5), ("key", 1), ("hold", 100)])
    older = store.load_team(tid)[0].fork()
    for name in ("price_adjustments", "clamp_output", "adjustment_references"):
        del older.__dict__[name]
    with monkeypatch.context() as before:
        before.setattr(TeamLedger, "class_version", 1)
        store.team_snapshots.save([store.team_snapshots.take(older)])
    loaded, used = store.load_team(tid)
    assert used == older.version
    assert same_state(loaded, _replayed(store, tid))
    assert (loaded.price_adjustments, loaded.clamp_output, loaded.adjustment_references) == ({}, False, {})


def test_a_snapshot_of_a_version_never_recorded_is_passed_over(store):
    """A snapshot claiming more events than the team has (a row from another ledger, say) cannot be
    caught by its digest; the balances read model, written with the events, says the team is not there."""
    tid, _ = _record(store, [("top_up", 5), ("hold", 70)])
    ahead = store.load_team(tid)[0].fork()
    ahead.add_credits(1_000)
    ahead.collect_events()  # its version moves on, but nothing of it is recorded
    store.team_snapshots.save([store.team_snapshots.take(ahead)])
    loaded, used = store.load_team(tid)
    assert used == 0
    assert same_state(loaded, _replayed(store, tid))
