"""`verify_ledger` checks every team snapshot against the full replay, and `rebuild` writes them again.

A snapshot is a cache of a team's state (``app/store/snapshots.py``): one that is corrupt, that
disagrees with the events, or that has no events behind it is a problem verify reports (naming the
team and the version); a rebuild drops them all and takes them again from its replay.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from contextlib import closing

import pytest

from app.store.event_store import LedgerStore, open_ledger_store
from app.store.snapshots import SnapshotRow, same_state, state_digest
from domain.ledger import TeamLedger, team_id
from projections.audit import verify_ledger
from projections.audit_snapshots import PROBLEMS_SHOWN
from projections.history import HistoryProjection
from tests.support.backend import RawDatabase, new_database_url
from tests.support.long_history import build_history

ALTERED = "it was altered or damaged"
TEAMS = {"acme": 150, "globex": 90, "initech": 20}  # requests: a hold and a charge each


@pytest.fixture
def ledger(tmp_path) -> Iterator[tuple[LedgerStore, RawDatabase]]:
    """Three teams with a snapshot every 20 of their events (26 in all), the audit history caught up."""
    url = new_database_url()
    store = open_ledger_store(url, tmp_path, pool_size=2)
    build_history(store, TEAMS, batch=10, snapshot_every=20)
    history = HistoryProjection(store, store.database)
    history.catch_up(batch=1000)
    history.close()
    yield store, RawDatabase(url, tmp_path)
    store.close()


def _newest(store: LedgerStore, name: str) -> SnapshotRow:
    row = store.team_snapshots.latest(team_id(name))
    assert row is not None
    return row


def _replayed(store: LedgerStore, tid: uuid.UUID, version: int) -> TeamLedger:
    """The team its events up to ``version`` make, from the first (no snapshot)."""
    team = None
    for event in store.events_after(tid, 0, upto=version):
        team = event.mutate(team)
    assert isinstance(team, TeamLedger)
    return team


def test_every_snapshot_is_checked_against_the_replay(ledger):
    store, _ = ledger
    report = verify_ledger(store, store.database)
    assert report.ok, report.problems
    assert report.snapshots == store.team_snapshots.count() == 26


def test_a_snapshot_whose_state_was_altered_fails_its_digest(ledger):
    store, raw = ledger
    row = _newest(store, "acme")
    damaged = bytearray(row.state)
    damaged[len(damaged) // 2] ^= 0x01
    raw.execute(
        "UPDATE team_snapshots SET state = ? WHERE team_id = ? AND version = ?",
        (bytes(damaged), row.team_id.hex, row.version),
    )
    report = verify_ledger(store, store.database)
    assert report.problems == [f"snapshot of team 'acme' at version {row.version} fails its digest: {ALTERED}"]
    assert report.snapshots == 26


def test_a_snapshot_with_a_valid_digest_that_disagrees_with_the_replay_is_found(ledger):
    store, _ = ledger
    row = _newest(store, "globex")
    lying = store.team_snapshots.restore(row)
    assert lying is not None
    lying.balance += 1
    store.team_snapshots.replace([store.team_snapshots.take(lying)])  # a valid digest over the wrong state
    report = verify_ledger(store, store.database)
    differs = f"balance {lying.balance} (replay: {lying.balance - 1})"
    assert report.problems == [f"snapshot of team 'globex' at version {row.version} differs from the replay: {differs}"]


def test_a_snapshot_taken_before_the_team_gained_some_state_is_checked_on_the_state_it_has(ledger):
    """Loads pass such a snapshot over (the events know the newer state); verify still compares what
    it holds with the replay, and counts it apart."""
    store, _ = ledger
    row = _newest(store, "acme")
    older = store.team_snapshots.restore(row)
    assert older is not None
    del older.__dict__["tpm"]  # as if taken before the team had a tokens-per-minute limit
    store.team_snapshots.replace([store.team_snapshots.take(older)])
    report = verify_ledger(store, store.database)
    assert report.ok, report.problems
    assert (report.snapshots, report.outdated_snapshots) == (26, 1)

    older.balance += 1
    store.team_snapshots.replace([store.team_snapshots.take(older)])
    differs = f"at version {row.version} differs from the replay: balance {older.balance} (replay: {older.balance - 1})"
    assert verify_ledger(store).problems == [f"snapshot of team 'acme' {differs}"]


def test_a_snapshot_of_a_version_the_team_never_reached_is_found(ledger):
    store, _ = ledger
    row = _newest(store, "initech")
    last = store.find_team(team_id("initech"))
    assert last is not None
    version = last.version + 7
    store.team_snapshots.save(
        [
            SnapshotRow(
                row.team_id,
                version,
                row.occurred_at_us,
                row.topic,
                row.state,
                state_digest(row.team_id, version, row.topic, row.state),
            )
        ]
    )
    report = verify_ledger(store, store.database)
    beyond = f"at version {version} is beyond the team's last event (version {last.version})"
    assert report.problems == [f"snapshot of team 'initech' {beyond}"]


def test_snapshots_of_a_team_that_has_no_events_are_found(ledger):
    store, _ = ledger
    row = _newest(store, "acme")
    ghost = uuid.uuid4()
    store.team_snapshots.save(
        [SnapshotRow(ghost, 4, row.occurred_at_us, row.topic, row.state, state_digest(ghost, 4, row.topic, row.state))]
    )
    report = verify_ledger(store)
    assert report.problems == [f"snapshots of team {ghost} have no events behind them"]


def test_many_bad_snapshots_are_listed_up_to_a_bound_and_counted(ledger):
    store, raw = ledger
    raw.execute("UPDATE team_snapshots SET digest = 'x'")
    report = verify_ledger(store)
    assert len(report.problems) == PROBLEMS_SHOWN + 1
    assert report.problems[-1] == f"… and {26 - PROBLEMS_SHOWN} more snapshot problem(s)"


def test_snapshots_beyond_where_the_replay_reached_are_skipped(ledger, monkeypatch):
    """Gateways keep writing (and snapshotting) while verify runs: the replay reads the events up to
    some point, and the snapshots of later versions are not checked, nor reported."""
    store, _ = ledger
    reached = (store.recorder.max_notification_id() or 0) // 2
    everything = store.notifications
    monkeypatch.setattr(store, "notifications", lambda: itertools.takewhile(lambda n: n.id <= reached, everything()))
    report = verify_ledger(store)
    assert report.ok, report.problems
    assert 0 < report.snapshots < 26


def test_rebuild_drops_every_snapshot_and_takes_them_again_from_its_replay(ledger):
    store, raw = ledger
    damaged = _newest(store, "acme")
    raw.execute(
        "UPDATE team_snapshots SET digest = 'x' WHERE team_id = ? AND version = ?",
        (damaged.team_id.hex, damaged.version),
    )
    raw.execute("DELETE FROM team_snapshots WHERE team_id = ?", (team_id("globex").hex,))
    assert not verify_ledger(store).ok

    with closing(HistoryProjection(store, store.database)) as history:
        history.rebuild(snapshot_every=50)

    for name in TEAMS:
        tid = team_id(name)
        team = store.find_team(tid)
        assert team is not None
        versions = store.team_snapshots.versions(tid, 0, 1000)
        assert versions == list(range(50, team.version + 1, 50)), name
        for version in versions:
            row = store.team_snapshots.at_version(tid, version)
            assert row is not None
            restored = store.team_snapshots.restore(row)
            assert restored is not None
            assert same_state(restored, _replayed(store, tid, version)), (name, version)
    report = verify_ledger(store, store.database)
    assert report.ok, report.problems
    assert report.snapshots == store.team_snapshots.count() == 6 + 3 + 0


def test_a_rebuild_without_snapshots_leaves_none(ledger):
    store, _ = ledger
    with closing(HistoryProjection(store, store.database)) as history:
        history.rebuild(snapshot_every=None)
    assert store.team_snapshots.count() == 0
    assert verify_ledger(store, store.database).ok
