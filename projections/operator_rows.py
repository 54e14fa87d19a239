"""The audit history's rows of an operator's actions that move no money.

A key issued or revoked, a restriction, a limit, a suspension, a price adjustment, a team opened,
auto-recharge set and each of its attempts begun or failed (the credit a succeeded one bought is a
top-up of its own):
each is a row of ``ledger_entries`` of its own kind, with amount 0 and the team's balance as it
stood (unchanged by it), saying what changed (in ``reference``), who did it (``actor``) and why
(``reason``). Kept in the same table as the money, in ledger order, so the history, the export and
``ledger verify``'s row-by-row check read one sequence: the check compares these rows with their
events like any other.
"""

from __future__ import annotations

from typing import Protocol, cast

from app.store.entry_rows import EntryHead, EntryRow
from domain.ledger import TeamLedger

#: Each operator's event that moves no money, and the kind of its audit history row.
OPERATOR_KINDS: dict[type[TeamLedger.Event], str] = {
    TeamLedger.Opened: "team_opened",
    TeamLedger.KeyIssued: "key_issued",
    TeamLedger.KeyRevoked: "key_revoked",
    TeamLedger.KeyModelsRestricted: "key_models",
    TeamLedger.KeyEndpointsRestricted: "key_endpoints",
    TeamLedger.KeyLimitsSet: "key_limits",
    TeamLedger.TeamLimitsSet: "team_limits",
    TeamLedger.Suspended: "suspended",
    TeamLedger.Reinstated: "reinstated",
    TeamLedger.PricesAdjusted: "price_adjustment",
    TeamLedger.OutputClampSet: "output_clamp",
    TeamLedger.BudgetSet: "budget",
    TeamLedger.AlertThresholdSet: "alert_threshold",
    TeamLedger.AutoRechargeSet: "auto_recharge",
    TeamLedger.RechargeStarted: "recharge_started",
    TeamLedger.RechargeFailed: "recharge_failed",
}


def _limits(rpm: int | None, tpm: int | None) -> str:
    return f"rpm={rpm or '-'} tpm={tpm or '-'}"


class _Said(Protocol):
    """What every operator's event says: who caused it, and why."""

    @property
    def actor(self) -> str: ...

    @property
    def reason(self) -> str: ...


def change_of(event: TeamLedger.Event) -> str:
    """What the action set, as the row's ``reference`` says it."""
    if isinstance(event, TeamLedger.KeyIssued):
        return event.label
    if isinstance(event, TeamLedger.KeyModelsRestricted):
        return "models=" + (",".join(event.models) or "*")
    if isinstance(event, TeamLedger.KeyEndpointsRestricted):
        return "endpoints=" + (",".join(event.endpoints) or "*")
    if isinstance(event, TeamLedger.KeyLimitsSet | TeamLedger.TeamLimitsSet):
        return _limits(event.rpm, event.tpm)
    if isinstance(event, TeamLedger.PricesAdjusted):
        return f"percent={event.percent}"
    if isinstance(event, TeamLedger.OutputClampSet):
        return "clamp_output=" + ("on" if event.enabled else "off")
    if isinstance(event, TeamLedger.BudgetSet):
        return f"limit={event.limit} period={event.period}" if event.limit is not None else "limit=none"
    if isinstance(event, TeamLedger.AlertThresholdSet):
        return f"{event.kind}={event.value}" + ("" if event.enabled else " removed")
    return _recharge_change(event)


def _recharge_change(event: TeamLedger.Event) -> str:
    """What auto-recharge's events set or did."""
    if isinstance(event, TeamLedger.AutoRechargeSet):
        if not event.enabled:
            return "off"
        return f"threshold={event.threshold} target={event.target} monthly_cap={event.monthly_cap}"
    if isinstance(event, TeamLedger.RechargeStarted):
        return f"{event.attempt} amount={event.amount}"
    if isinstance(event, TeamLedger.RechargeFailed):
        return event.attempt + (" turned_off" if event.turned_off else "")
    return ""


def operator_row(head: EntryHead, event: TeamLedger.Event, balance: int) -> EntryRow | None:
    """The row of an operator's event that moves no money (None for any other event); ``head``: the
    columns every entry fills alike, ``balance``: the team's, which the event leaves as it was."""
    kind = OPERATOR_KINDS.get(type(event))
    if kind is None:
        return None
    said = cast(_Said, event)  # every event of OPERATOR_KINDS says who and why, but an attempt's start
    actor = getattr(said, "actor", "auto_recharge")
    model = event.model if isinstance(event, TeamLedger.PricesAdjusted) else ""
    return EntryRow(
        **head,
        kind=kind,
        key_id=getattr(event, "key_id", ""),
        model=model,
        amount=0,
        balance_after=balance,
        reference=change_of(event),
        actor=actor,
        reason=getattr(said, "reason", ""),
    )
