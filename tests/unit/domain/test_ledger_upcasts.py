"""A snapshot of the state as version 4 kept it (holds in parallel dictionaries, keys as dictionaries)
is read as today's records: the team it gives is the team its events make."""

from __future__ import annotations

from typing import Any

from domain.budgets import Budget
from domain.ledger import TeamLedger
from domain.ledger_holds import RequestOnLedger
from domain.ledger_state import Hold, KeyPolicy


def _team() -> TeamLedger:
    team = TeamLedger.open("acme")
    team.add_credits(10_000_000)
    team.issue_key("k1", "hash-1", "ci")
    team.issue_key("k2", "hash-2", "batch")
    team.restrict_key("k1", ["m"])
    team.limit_key("k1", 60, None)
    team.set_budget(5_000_000, "day", "k1")
    team.set_budget(9_000_000, "month")
    team.clamp_outputs(True, "k2")
    team.revoke_key("k2")
    team.place_hold(RequestOnLedger("r1", "k1", "m", "chat"), 1_000_000, owner="p1", idem_key="K1")
    team.place_hold(RequestOnLedger("r2", "k2", "m", "chat"), 500_000)
    team.lease_credits("lease_1", 100_000, 100_000, owner="p2")
    return team


def _as_version_4(team: TeamLedger) -> dict[str, Any]:
    """The team's state as version 4 kept it (what its snapshots hold)."""
    state = {k: v for k, v in vars(team).items() if k not in ("_id", "_version", "_pending_events")}
    holds = team.holds
    state["holds"] = {held_for: h.amount for held_for, h in holds.items()}
    state["hold_times"] = {held_for: h.placed for held_for, h in holds.items()}
    state["hold_owners"] = {held_for: h.owner for held_for, h in holds.items() if h.owner}
    state["hold_keys"] = {held_for: h.key_id for held_for, h in holds.items() if h.key_id is not None}
    state["keys"] = {
        "k1": {
            "hash": "hash-1",
            "label": "ci",
            "revoked": False,
            "models": ["m"],
            "rpm": 60,
            "tpm": None,
            "budget": {"limit": 5_000_000, "period": "day"},
        },
        "k2": {"hash": "hash-2", "label": "batch", "revoked": True, "clamp": True},
    }
    state["budget"] = {"limit": 9_000_000, "period": "month"}
    return state


def test_a_version_4_state_becomes_the_records_its_events_make():
    team = _team()
    state = _as_version_4(team)
    TeamLedger.upcast_v4_v5(state)
    assert (
        state["holds"]
        == team.holds
        == {
            "r1": Hold(1_000_000, team.holds["r1"].placed, "k1", "p1", "K1"),
            "r2": Hold(500_000, team.holds["r2"].placed, "k2"),
            "lease_1": Hold(100_000, team.holds["lease_1"].placed, None, "p2"),
        }
    )
    assert (
        state["keys"]
        == team.keys
        == {
            "k1": KeyPolicy("hash-1", "ci", models=("m",), rpm=60, budget=Budget(5_000_000, "day")),
            "k2": KeyPolicy("hash-2", "batch", revoked=True, clamp=True),
        }
    )
    assert state["budget"] == team.budget == Budget(9_000_000, "month")
    assert not {"hold_times", "hold_owners", "hold_keys"} & state.keys()
    assert {k: v for k, v in state.items() if not k.startswith("_")} == {
        k: v for k, v in vars(team).items() if not k.startswith("_")
    }


def test_a_state_already_of_records_is_left_as_it_is():
    team = _team()
    state = {k: v for k, v in vars(team).items() if not k.startswith("_")}
    before = dict(state)
    TeamLedger.upcast_v4_v5(state)
    assert state == before
