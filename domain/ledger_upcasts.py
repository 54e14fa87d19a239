"""The team state's earlier shapes, and how a snapshot of each is read today.

A snapshot (``projections/snapshots.py``) stores the team's state as it was when taken, with the
state's version (``STATE_VERSION`` in ``domain/ledger_state.py``, the aggregate's ``class_version``).
Reading one of an older version runs each upcast from its version to today's in turn, so a team with
a long history still loads from its snapshot after an upgrade instead of replaying every event. Each
upcast says what the state was then; like a migration, none is ever changed once released.
"""

from __future__ import annotations

from typing import Any

from domain import rerates
from domain.budgets import Budget
from domain.credit_lots import LEGACY, legacy_lot
from domain.ledger_state import Hold, KeyPolicy


def upcast_v1_v2(state: dict[str, Any]) -> None:
    """A snapshot taken before teams had price adjustments, an output clamp and adjustment
    references: none of their events existed then, so the team had none of them."""
    state.setdefault("price_adjustments", {})
    state.setdefault("clamp_output", False)
    state.setdefault("adjustment_references", {})


def upcast_v2_v3(state: dict[str, Any]) -> None:
    """A snapshot taken before budgets: no budget was set, and the holds then open are not
    counted against any key's (a key's holds are counted from the holds placed since)."""
    state.setdefault("budget", None)
    state.setdefault("spend", {})
    state.setdefault("key_held", {})
    state.setdefault("hold_keys", {})
    state.setdefault("alert_thresholds", {})


def upcast_v3_v4(state: dict[str, Any]) -> None:
    """A snapshot taken before re-rates were events of their own: the re-rates applied until then
    are known by their adjustments' references."""
    applied: dict[str, dict[str, Any]] = {}
    for reference in state.get("adjustment_references", {}):
        rerates.with_legacy(applied, reference)
    state.setdefault("rerates", applied)


def upcast_v4_v5(state: dict[str, Any]) -> None:
    """A snapshot taken when the state was kept in plain dictionaries: a hold was its amount by
    request id, with when it was placed (``hold_times``), its gateway process (``hold_owners``) and
    its key (``hold_keys``) in dictionaries beside it, and its Idempotency-Key known only from
    ``idem_holds``; a key was a dictionary of what was set on it, and a budget ``{limit, period}``.
    Each becomes its record (what is already a record stays as it is)."""
    times: dict[str, float] | None = state.pop("hold_times", None)
    owners: dict[str, str] = state.pop("hold_owners", {})
    key_of: dict[str, str] = state.pop("hold_keys", {})
    if times is not None:
        idem_of = {request_id: idem_key for idem_key, request_id in state["idem_holds"].items()}
        state["holds"] = {
            held_for: Hold(
                amount, times[held_for], key_of.get(held_for), owners.get(held_for, ""), idem_of.get(held_for, "")
            )
            for held_for, amount in state["holds"].items()
        }
    state["keys"] = {
        key_id: key if isinstance(key, KeyPolicy) else _key_policy(key) for key_id, key in state["keys"].items()
    }
    if isinstance(state["budget"], dict):
        state["budget"] = Budget.from_record(state["budget"])


def upcast_v5_v6(state: dict[str, Any]) -> None:
    """A snapshot taken before credit lots: all the team's credit was one pool, which is the legacy
    lot (what replaying the events from before lots makes of it too); nothing expired or was owed."""
    balance = int(state["balance"])
    state.setdefault("lots", {LEGACY: legacy_lot(balance)} if balance > 0 else {})
    state.setdefault("next_expiry", None)


def upcast_v6_v7(state: dict[str, Any]) -> None:
    """A snapshot taken before payments and auto-recharge: the team had none, and owed nothing (the
    first state with lots kept a ``debt`` that was always 0 then)."""
    state.pop("debt", None)
    state.setdefault("owed", 0)
    state.setdefault("payments", {})
    state.setdefault("recharge", None)


def _key_policy(key: dict[str, Any]) -> KeyPolicy:
    """A key as the state kept it before it was a record: what was never set on it is absent."""
    return KeyPolicy(
        key["hash"],
        key["label"],
        key["revoked"],
        tuple(key.get("models", ())),
        tuple(key.get("endpoints", ())),
        key.get("rpm"),
        key.get("tpm"),
        key.get("clamp"),
        Budget.from_record(key.get("budget")),
    )
