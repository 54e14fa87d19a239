"""The operators' commands on what a team's keys may do: issue and revoke keys, restrict them, set
rate limits, budgets, alerts, price adjustments and the output clamp, suspend and reinstate.

Part of the team aggregate (``TeamLedger`` in ``domain/ledger.py`` is these commands, the money's and
the state). Each checks its guards, then records its event (``domain/ledger_events.py``); none moves
money. Every one takes who gives it (``actor``) and why (``reason``), kept on its event.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from domain import ledger_events as events
from domain.alerts import check_threshold
from domain.bounds import BUDGET, PRICE_ADJUSTMENT_PERCENT, RPM, TPM, Bound, OutOfBounds
from domain.budgets import PERIODS
from domain.ledger_errors import LedgerError
from domain.ledger_state import LedgerState


def _limit(value: int | None, bound: Bound) -> int | None:
    """A per-minute limit: a whole number in its range (``domain/bounds.py``), or ``None`` (or 0) for none."""
    if value is None or (value == 0 and not isinstance(value, bool)):
        return None
    problem = bound.problem(value)
    if problem is not None:
        raise OutOfBounds(f"{problem} (0 for no limit)")
    return value


class TeamPolicies(LedgerState):
    """The policy commands of the team aggregate (a part of ``TeamLedger``, never used alone)."""

    if TYPE_CHECKING:

        def trigger_event(self, event_class: Any, **kwargs: Any) -> None:
            """The aggregate's (``TeamLedger.trigger_event``): records an event at the team's instant."""

    def issue_key(self, key_id: str, key_hash: str, label: str = "", *, actor: str = "", reason: str = "") -> None:
        if key_id in self.keys:
            raise LedgerError(f"key id {key_id!r} is already issued")
        self.trigger_event(events.KeyIssued, key_id=key_id, key_hash=key_hash, label=label, actor=actor, reason=reason)

    def revoke_key(self, key_id: str, *, actor: str = "", reason: str = "") -> None:
        if self.key(key_id).revoked:
            raise LedgerError(f"key {key_id!r} of team {self.name!r} is already revoked")
        self.trigger_event(events.KeyRevoked, key_id=key_id, actor=actor, reason=reason)

    def restrict_key(self, key_id: str, models: list[str], *, actor: str = "", reason: str = "") -> None:
        self.key(key_id)
        self.trigger_event(
            events.KeyModelsRestricted, key_id=key_id, models=sorted(set(models)), actor=actor, reason=reason
        )

    def restrict_key_endpoints(self, key_id: str, endpoints: list[str], *, actor: str = "", reason: str = "") -> None:
        self.key(key_id)
        self.trigger_event(
            events.KeyEndpointsRestricted, key_id=key_id, endpoints=sorted(set(endpoints)), actor=actor, reason=reason
        )

    def limit_key(self, key_id: str, rpm: int | None, tpm: int | None, *, actor: str = "", reason: str = "") -> None:
        self.key(key_id)
        self.trigger_event(
            events.KeyLimitsSet, key_id=key_id, rpm=_limit(rpm, RPM), tpm=_limit(tpm, TPM), actor=actor, reason=reason
        )

    def limit(self, rpm: int | None, tpm: int | None, *, actor: str = "", reason: str = "") -> None:
        self.trigger_event(events.TeamLimitsSet, rpm=_limit(rpm, RPM), tpm=_limit(tpm, TPM), actor=actor, reason=reason)

    def suspend(self, reason: str = "", *, actor: str = "") -> None:
        if self.suspended:
            raise LedgerError(f"team {self.name!r} is already suspended")
        self.trigger_event(events.Suspended, reason=reason, actor=actor)

    def reinstate(self, *, actor: str = "", reason: str = "") -> None:
        if not self.suspended:
            raise LedgerError(f"team {self.name!r} is not suspended")
        self.trigger_event(events.Reinstated, actor=actor, reason=reason)

    def set_budget(
        self, limit: int | None, period: str, key_id: str = "", *, actor: str = "", reason: str = ""
    ) -> None:
        """Let the key ``key_id`` (no key: the whole team) spend at most ``limit`` micro-credits per
        ``period``; a ``limit`` of None lifts its budget."""
        if key_id:
            self.key(key_id)
        if period not in PERIODS:
            raise LedgerError(f"a budget's period is one of {', '.join(PERIODS)}, not {period!r}")
        if limit is not None:
            BUDGET.check(limit)
        self.trigger_event(events.BudgetSet, key_id=key_id, limit=limit, period=period, actor=actor, reason=reason)

    def set_alert(
        self, kind: str, value: Decimal, key_id: str = "", *, enabled: bool = True, actor: str = "", reason: str = ""
    ) -> None:
        """Alert when the key's (no key: the team's) budget reaches ``value`` percent
        (``budget_percent``), or the team's balance falls under ``value`` micro-credits
        (``balance_below``); ``enabled`` False removes the alert."""
        if key_id:
            self.key(key_id)
        try:
            recorded = check_threshold(kind, value, key_id)
        except ValueError as exc:
            raise LedgerError(str(exc)) from None
        self.trigger_event(
            events.AlertThresholdSet,
            key_id=key_id,
            kind=kind,
            value=recorded,
            enabled=enabled,
            actor=actor,
            reason=reason,
        )

    def adjust_prices(self, percent: Decimal, model: str = "", reason: str = "", *, actor: str = "") -> None:
        """Price the team's requests ``percent`` above (negative: below) the price list, for ``model``
        or, with no model, for every model without an adjustment of its own (0 ends it)."""
        PRICE_ADJUSTMENT_PERCENT.check(percent)
        self.trigger_event(
            events.PricesAdjusted, model=model, percent=f"{percent.normalize():f}", reason=reason, actor=actor
        )

    def clamp_outputs(self, enabled: bool, key_id: str = "", *, actor: str = "", reason: str = "") -> None:
        """Lower a request's output limit to what the balance covers instead of refusing it, for the
        key ``key_id`` or (no key) for the whole team."""
        if key_id:
            self.key(key_id)
        self.trigger_event(events.OutputClampSet, key_id=key_id, enabled=enabled, actor=actor, reason=reason)
