"""A ledger written before the team state was typed loads, replays, verifies and carries on as it did.

``tests/fixtures/ledger_v4`` holds every row the ledger of commit 7f478e1 stored of two teams (every
kind of event, under its topic then; snapshots of the state as it was then, version 4, when holds and
keys were plain dictionaries; the read models and the audit history as that code projected them),
and what that code's state said of each team. The rows are written as they are into a database of the
backend under test, and the migrations since are run over them as over a database upgraded in place
(0018 fills usage by endpoint from the audit history); today's code must read them as the truth they are.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import StoredEvent

from app.store.event_store import LedgerStore, open_ledger_store
from app.store.schema import upgrade_read_models
from app.store.snapshots import SnapshotRow, same_state
from domain.budgets import Budget
from domain.credit_lots import LEGACY, legacy_lot
from domain.ledger import TeamLedger, team_id
from domain.ledger_holds import RequestOnLedger
from domain.ledger_state import STATE_VERSION, Hold, KeyPolicy
from domain.pricing import Price
from domain.usage import TokenUsage
from projections.audit import verify_caught_up, verify_ledger
from projections.history import HistoryProjection
from tests.support.backend import RawDatabase, new_database_url

FIXTURE = Path(__file__).parents[2] / "fixtures" / "ledger_v4"
ROWS = json.loads((FIXTURE / "rows.json").read_text())
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())
PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))


def _value(value: Any) -> Any:
    return base64.b64decode(value["base64"]) if isinstance(value, dict) else value


@pytest.fixture
def old_ledger(tmp_path: Path) -> Iterator[tuple[LedgerStore, RawDatabase]]:
    """A database of the backend under test holding exactly the rows the old code stored, upgraded
    by the migrations that came after it (the tables they made are made again, from those rows)."""
    url = new_database_url()
    store = open_ledger_store(url, tmp_path)
    raw = RawDatabase(url, tmp_path)
    raw.execute("DELETE FROM projection_tracking")
    for table, dumped in ROWS.items():
        columns = dumped["columns"]
        name = "{events}" if table == "stored_events" else table
        for row in dumped["rows"]:
            values = [_value(v) for v in row]
            if table == "stored_events" and raw.db.kind != "sqlite":
                values[0] = UUID(values[0])  # PostgreSQL's events table keeps the id as a uuid
            raw.execute(
                f"INSERT INTO {name} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", tuple(values)
            )
    assert store.recorder.max_notification_id() == len(ROWS["stored_events"]["rows"])  # ids as they were
    raw.execute("DROP TABLE usage_by_endpoint")  # came with 0018, after the old code
    raw.execute("ALTER TABLE inflight_streams DROP COLUMN price_key")  # and this with 0019
    raw.execute("UPDATE alembic_version SET version_num = '0017'")
    upgrade_read_models(store.database.sqlalchemy_url())
    yield store, raw
    store.close()


def _replayed(store: LedgerStore, tid: UUID, upto: int | None = None) -> TeamLedger:
    team = None
    for event in store.events_after(tid, 0, upto=upto):
        team = event.mutate(team)
    assert team is not None
    return team


def _snapshot_versions(name: str) -> list[int]:
    return [row[1] for row in ROWS["team_snapshots"]["rows"] if row[0] == team_id(name).hex]


def _as_it_was_said(team: TeamLedger) -> dict[str, Any]:
    """What today's state says of the team, in the terms ``expected.json`` has it (the old code's)."""
    return {
        "version": team.version,
        "balance": team.balance,
        "held": team.held,
        "holds": {held_for: [h.amount, h.placed, h.key_id, h.owner, h.idem_key] for held_for, h in team.holds.items()},
        "budget": team.budget.as_record() if team.budget else None,
        "key_held": team.key_held,
        "spend": team.spend,
        "idem_holds": team.idem_holds,
        "expired": team.expired,
        "lease_charges": list(team.lease_charges),
        "suspended": team.suspended,
        "rpm": team.rpm,
        "tpm": team.tpm,
        "policy_version": team.policy_version,
        "price_adjustments": team.price_adjustments,
        "clamp_output": team.clamp_output,
        "alert_thresholds": team.alert_thresholds,
        "rerates": team.rerates,
        "adjustment_references": list(team.adjustment_references),
    }


def _key_as_it_was(key: dict[str, Any]) -> KeyPolicy:
    """A key as the old state kept it (what was never set on it absent), as the record it is now."""
    budget = key.get("budget")
    return KeyPolicy(
        key["hash"],
        key["label"],
        key["revoked"],
        tuple(key.get("models", ())),
        tuple(key.get("endpoints", ())),
        key.get("rpm"),
        key.get("tpm"),
        key.get("clamp"),
        None if budget is None else Budget(budget["limit"], budget["period"]),
    )


def test_a_ledger_written_before_verifies_whole_snapshots_and_audit_history_included(old_ledger):
    """Every old event replays; every old snapshot (of the old state, upcast) is the replay at its
    version; every old audit history, usage and attribution row is the row made of its event today."""
    store, _ = old_ledger
    report = verify_ledger(store, store.database)
    assert report.problems == []
    assert (report.events, report.teams, report.charges) == (48, 2, 5)
    assert (report.snapshots, report.outdated_snapshots, report.projected) == (4, 0, 48)


@pytest.mark.parametrize("name", ["acme", "beta"])
def test_each_team_loads_from_its_old_snapshots_as_its_events_make_it(old_ledger, name):
    store, _ = old_ledger
    tid = team_id(name)
    expected = EXPECTED[name]
    loaded, used = store.load_team(tid)
    assert used == max(_snapshot_versions(name))  # upcast, not passed over
    replayed = _replayed(store, tid)
    assert same_state(loaded, replayed)
    said = {k: v for k, v in expected.items() if k != "keys"}
    assert _as_it_was_said(loaded) == said
    assert loaded.keys == {key_id: _key_as_it_was(key) for key_id, key in expected["keys"].items()}
    for version in _snapshot_versions(name):
        at_version, from_snapshot = store.load_team(tid, version)
        assert from_snapshot == version
        assert same_state(at_version, _replayed(store, tid, version))


def test_the_audit_history_rebuilt_today_is_the_history_projected_then(old_ledger):
    store, raw = old_ledger
    tables = (
        "ledger_entries",
        "usage_daily",
        "usage_by_attribution",
        "usage_by_endpoint",
        "team_balances",
        "api_keys",
        "charged_requests",
    )
    order = {
        "ledger_entries": "notification_id",
        "usage_daily": "team_name, key_id, model, day",
        "usage_by_attribution": "team_name, dimension, value, day",
        "usage_by_endpoint": "team_name, endpoint, day",
        "team_balances": "team_id",
        "api_keys": "key_hash",
        "charged_requests": "team_id, request_id",
    }
    before = {t: raw.execute(f"SELECT * FROM {t} ORDER BY {order[t]}") for t in tables}
    assert len(before["ledger_entries"]) == 28
    assert [r[:4] for r in before["usage_by_endpoint"]] == [
        ("acme", "chat.completions", "2026-11-27", 4),
        ("acme", "messages", "2026-11-27", 1),
    ]  # as 0018 filled it from the audit history, and as the rebuild makes it of the events
    history = HistoryProjection(store, store.database)
    try:
        assert history.rebuild(snapshot_every=None) == 48
    finally:
        history.close()
    assert {t: raw.execute(f"SELECT * FROM {t} ORDER BY {order[t]}") for t in tables} == before


def test_a_ledger_written_before_carries_on_with_today_s_code(old_ledger):
    """A team loaded from an old snapshot takes today's commands; its new snapshot (the typed state)
    is read back as the replay makes it, and the whole ledger still verifies."""
    store, _ = old_ledger
    team, _ = store.load_team(team_id("acme"))
    assert team is not None
    team.charge(RequestOnLedger("r7", "k1", "m", "chat.completions"), TokenUsage(300, 100), PRICE, Decimal(100))
    team.charge(
        RequestOnLedger("q4", "k1", "m", "chat.completions"), TokenUsage(10, 10), PRICE, Decimal(100), lease="lease_3"
    )
    team.return_lease("lease_3")
    team.set_budget(5_000_000, "week", "k1")
    team.place_hold(RequestOnLedger("r8", "k1", "m", "chat.completions"), 100_000, owner="p9", idem_key="K8")
    store.save_teams([team])
    store.team_snapshots.save([store.team_snapshots.take(team)])
    loaded, used = store.load_team(team_id("acme"))
    assert used == team.version
    assert same_state(loaded, _replayed(store, team_id("acme")))
    assert same_state(loaded, team)
    assert store.team_snapshots.decode(store.team_snapshots.latest(team_id("acme"))).keys["k1"].budget.period == "week"
    report = verify_caught_up(store)
    assert report.problems == []
    assert (report.snapshots, report.outdated_snapshots) == (5, 0)


def _snapshot_state(store: LedgerStore, row: SnapshotRow) -> dict[str, Any]:
    stored = StoredEvent(row.team_id, row.version, row.topic, zlib.decompress(row.state))
    return dict(store.mapper.to_domain_event(stored).state)  # type: ignore[attr-defined]


def test_the_old_snapshots_hold_the_old_state_and_new_ones_today_s_records(old_ledger):
    """The fixture's snapshots are of the state as it was (version 4: holds in parallel dictionaries);
    one taken today is of version 7 and holds the records, read back as records: its credit, from
    before lots, is all the legacy lot's; it has no payments and no auto-recharge."""
    store, _ = old_ledger
    old = _snapshot_state(store, store.team_snapshots.latest(team_id("acme")))
    assert old["class_version"] == 4
    assert {"hold_times", "hold_owners", "hold_keys"} <= old.keys()
    assert old["keys"]["k1"]["hash"] == "hash-k1"
    team, _ = store.load_team(team_id("acme"))
    new = _snapshot_state(store, store.team_snapshots.take(team))
    assert new["class_version"] == STATE_VERSION == 7
    assert new["lots"] == team.lots == {LEGACY: legacy_lot(team.balance)}
    assert (team.owed, team.payments, team.recharge) == (0, {}, None)
    assert not {"hold_times", "hold_owners", "hold_keys"} & new.keys()
    assert new["holds"] == team.holds
    assert new["holds"]["r7"] == Hold(400_000, EXPECTED["acme"]["holds"]["r7"][1], "k1", "p1", "K7")
    assert new["keys"] == team.keys
    assert new["budget"] == team.budget == Budget(45_000_000, "month")
