"""Who did what: the audit history's rows of an operator's actions, with their actor and reason,
and the admin key directory, each checked against the events by ``verify_ledger``."""

from __future__ import annotations

import re

import pytest

from app.admin_keys import issue_admin_key, revoke_admin_key
from app.keys import hash_key
from app.ledger.results import KeyTerms, Limits
from app.ledger.service import LedgerService
from app.ledger.writer import LedgerWriter
from app.store.event_store import LedgerStore, open_ledger_store
from projections.audit import verify_ledger
from projections.history import HistoryProjection
from tests.support.backend import RawDatabase, new_database_url

OPERATOR = "admin:adm_0123456789ab"


@pytest.fixture
def ledger(tmp_path) -> tuple[LedgerStore, RawDatabase]:
    """A team an operator opened, topped up, gave a key, limited, suspended and reinstated."""
    url = new_database_url()
    store = open_ledger_store(url, tmp_path)
    with LedgerWriter(store) as writer:
        service = LedgerService(writer)
        service.create_team("acme", 1_000_000, actor="cli:ops@box", reason="signed up")
        service.top_up("acme", 500_000, "INV-1", actor=OPERATOR, reason="invoice paid")
        key = service.issue_key("acme", "ci", KeyTerms(limits=Limits(rpm=10)), actor=OPERATOR, reason="for CI")
        service.suspend("acme", "unpaid", actor=OPERATOR)
        service.reinstate("acme", actor=OPERATOR, reason="paid")
        service.revoke_key("acme", key.key_id, actor=OPERATOR, reason="leaked")
    yield store, RawDatabase(url, tmp_path)
    store.close()


def rows(store: LedgerStore) -> list[dict]:
    history = HistoryProjection(store, store.database)
    try:
        return history.entries(team="acme")
    finally:
        history.close()


def project(store: LedgerStore, batch: int) -> None:
    history = HistoryProjection(store, store.database)
    history.catch_up(batch=batch)
    history.close()


@pytest.mark.parametrize("batch", [1, 500])  # an event at a time: each operator's row reads the balance back
def test_every_operator_action_is_a_row_saying_who_and_why_at_the_balance_it_left(ledger, batch):
    store, _ = ledger
    project(store, batch)
    shown = [(r["kind"], r["amount"], r["balance_after"], r["actor"], r["reason"]) for r in rows(store)]
    assert shown == [
        ("team_opened", 0, 0, "cli:ops@box", "signed up"),
        ("top_up", 1_000_000, 1_000_000, "cli:ops@box", "signed up"),
        ("top_up", 500_000, 1_500_000, OPERATOR, "invoice paid"),
        ("key_issued", 0, 1_500_000, OPERATOR, "for CI"),
        ("key_limits", 0, 1_500_000, OPERATOR, "for CI"),
        ("suspended", 0, 1_500_000, OPERATOR, "unpaid"),
        ("reinstated", 0, 1_500_000, OPERATOR, "paid"),
        ("key_revoked", 0, 1_500_000, OPERATOR, "leaked"),
    ]
    assert rows(store)[4]["reference"] == "rpm=10 tpm=-"
    assert verify_ledger(store, store.database).ok


def test_the_rebuilt_history_equals_the_projected_one(ledger):
    store, _ = ledger
    project(store, 1)
    projected = rows(store)
    history = HistoryProjection(store, store.database)
    history.rebuild()
    history.close()
    assert rows(store) == projected


@pytest.mark.parametrize(
    ("column", "value"), [("actor", "admin:someone-else"), ("reason", "no reason"), ("balance_after", 7)]
)
def test_an_operator_row_that_differs_from_its_event_is_found(ledger, column, value):
    store, raw = ledger
    project(store, 500)
    raw.execute(f"UPDATE ledger_entries SET {column} = ? WHERE kind = 'suspended'", (value,))
    report = verify_ledger(store, store.database)
    assert len(report.problems) == 1
    assert re.match(r"audit history row for event #\d+ differs from its event", report.problems[0])


def test_events_recorded_before_actors_load_and_verify_with_none(ledger):
    store, raw = ledger
    for event_id, state in raw.events("TeamLedger.KeyRevoked"):
        old = re.sub(rb',?"(actor|reason)":"[^"]*"', b"", state)
        assert old != state
        raw.set_event_state(event_id, old)
    raw.relog()  # the log of a ledger written so, as migration 0021 builds it
    project(store, 500)
    revoked = rows(store)[-1]
    assert (revoked["kind"], revoked["actor"], revoked["reason"]) == ("key_revoked", "", "")
    assert verify_ledger(store, store.database).ok


def test_the_admin_key_directory_follows_its_events_and_is_checked_against_them(ledger):
    store, raw = ledger
    issued = issue_admin_key(store, "alice", "auditor", actor="cli:ops@box", reason="audit")
    found = store.find_admin_key(hash_key(issued.secret))
    assert found is not None
    assert (found.key_id, found.role, found.revoked) == (issued.key_id, "auditor", False)
    assert issued.secret.encode() not in raw.everything_stored()
    assert verify_ledger(store).ok

    raw.execute("UPDATE admin_keys SET role = 'operator'")  # an auditor promoted behind the ledger's back
    report = verify_ledger(store)
    assert report.problems
    assert f"admin key directory row of '{issued.key_id}' differs" in report.problems[0]
    history = HistoryProjection(store, store.database)
    history.rebuild()
    history.close()
    assert verify_ledger(store).ok
    assert store.find_admin_key(hash_key(issued.secret)).role == "auditor"  # type: ignore[union-attr]

    raw.execute(
        "INSERT INTO admin_keys (key_hash, key_id, name, role, revoked, issued_at, issued_by, version) "
        "VALUES ('forged', 'adm_forged', 'mallory', 'operator', 0, '2026-01-01', '', 1)"
    )
    assert "admin key directory has key 'adm_forged', which no event issued" in verify_ledger(store).problems

    raw.execute("DELETE FROM admin_keys WHERE key_id = 'adm_forged'")
    revoke_admin_key(store, issued.key_id, actor="cli:ops@box", reason="left")
    assert store.find_admin_key(hash_key(issued.secret)).revoked  # type: ignore[union-attr]
    assert verify_ledger(store, store.database).ok
