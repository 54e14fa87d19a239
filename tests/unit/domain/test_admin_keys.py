"""The admin keys aggregate: issued with a role, revoked once, and replayed from its events."""

from __future__ import annotations

from typing import cast

import pytest

from domain.admin_keys import ADMIN_KEYS_ID, AdminKeyNotFound, AdminKeys
from domain.aggregates import NON_TEAM_IDS
from domain.ledger import LedgerError, TeamLedger
from domain.prices import PRICE_LIST_ID


def replayed(keys: AdminKeys) -> AdminKeys:
    """The aggregate as its recorded events make it again."""
    again: AdminKeys | None = None
    for event in keys.collect_events():
        again = cast(AdminKeys, event.mutate(again))
    assert again is not None
    return again


def test_keys_are_issued_with_a_role_and_revoked_with_who_and_why():
    keys = AdminKeys.start()
    keys.issue("adm_1", "hash-1", "alice", "auditor", actor="cli:root@box", reason="joined audit")
    keys.issue("adm_2", "hash-2", "oscar", "operator", actor="cli:root@box")
    keys.revoke("adm_1", actor="admin:adm_2", reason="left")
    issued, revoked = keys.pending_events[1], keys.pending_events[3]
    assert isinstance(issued, AdminKeys.AdminKeyIssued)
    assert isinstance(revoked, AdminKeys.AdminKeyRevoked)
    assert (issued.key_hash, issued.role, issued.actor, issued.reason) == (
        "hash-1",
        "auditor",
        "cli:root@box",
        "joined audit",
    )
    assert (revoked.key_id, revoked.actor, revoked.reason) == ("adm_1", "admin:adm_2", "left")
    again = replayed(keys)
    assert again.id == ADMIN_KEYS_ID
    assert [(k.key_id, k.role, k.revoked, k.issued_by) for k in again.keys.values()] == [
        ("adm_1", "auditor", True, "cli:root@box"),
        ("adm_2", "operator", False, "cli:root@box"),
    ]
    assert again.keys["adm_1"].version == 4  # the revocation's


def test_a_role_other_than_auditor_or_operator_is_refused():
    keys = AdminKeys.start()
    with pytest.raises(LedgerError, match="role is one of auditor, operator"):
        keys.issue("adm_1", "h", "eve", "root", actor="cli:x@y")
    assert len(keys.pending_events) == 1  # only its start: nothing recorded


@pytest.mark.parametrize("name", ["", "two words", "x" * 65, "-dash-first", "new\nline"])
def test_a_name_the_history_could_not_show_plainly_is_refused(name):
    with pytest.raises(LedgerError, match="name"):
        AdminKeys.start().issue("adm_1", "h", name, "auditor", actor="cli:x@y")


def test_a_name_in_force_is_not_issued_twice_but_may_be_once_revoked():
    keys = AdminKeys.start()
    keys.issue("adm_1", "h1", "alice", "auditor", actor="a")
    with pytest.raises(LedgerError, match="already in force"):
        keys.issue("adm_2", "h2", "alice", "operator", actor="a")
    with pytest.raises(LedgerError, match="already issued"):
        keys.issue("adm_1", "h3", "bob", "operator", actor="a")
    keys.revoke("adm_1", actor="a")
    keys.issue("adm_2", "h2", "alice", "operator", actor="a")
    assert keys.keys["adm_2"].role == "operator"


def test_a_key_is_revoked_once_and_only_if_it_exists():
    keys = AdminKeys.start()
    with pytest.raises(AdminKeyNotFound, match="no admin key 'adm_9'"):
        keys.revoke("adm_9", actor="a")
    keys.issue("adm_1", "h1", "alice", "auditor", actor="a")
    keys.revoke("adm_1", actor="a")
    with pytest.raises(LedgerError, match="already revoked"):
        keys.revoke("adm_1", actor="a")


def test_the_aggregates_without_a_team_are_named_in_one_place():
    assert {PRICE_LIST_ID, ADMIN_KEYS_ID} == NON_TEAM_IDS
    assert TeamLedger.open("acme").id not in NON_TEAM_IDS


def test_every_operator_event_keeps_its_actor_and_reason():
    team = TeamLedger.open("acme", actor="cli:root@box", reason="signed")
    who = {"actor": "admin:adm_1", "reason": "ticket 7"}
    team.add_credits(10, "INV-1", **who)
    team.issue_key("k1", "h", "ci", **who)
    team.restrict_key("k1", ["m"], **who)
    team.restrict_key_endpoints("k1", ["chat.completions"], **who)
    team.limit_key("k1", 5, None, **who)
    team.limit(10, None, **who)
    team.clamp_outputs(True, "k1", **who)
    team.suspend("ticket 7", actor="admin:adm_1")
    team.reinstate(**who)
    team.adjust_credits(-1, "ticket 7", actor="admin:adm_1")
    team.revoke_key("k1", **who)
    events = team.collect_events()
    assert (events[0].actor, events[0].reason) == ("cli:root@box", "signed")  # type: ignore[attr-defined]
    assert {(e.actor, e.reason) for e in events[1:]} == {("admin:adm_1", "ticket 7")}  # type: ignore[attr-defined]
