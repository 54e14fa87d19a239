"""Auto-recharge on the team ledger: its settings, each attempt begun and failed, as events.

``domain/auto_recharge.py`` says when an attempt is due and for how much. Here the team records it:
``begin_recharge`` records ``RechargeStarted`` under an attempt id the gateway then creates the
off-session payment with (its idempotency key, so a retried creation never pays twice); a second
attempt is refused while one is pending, which the event store's optimistic concurrency makes hold
across every gateway process. The attempt's credit is the payment's (``credit_payment`` naming the
attempt), recorded once it succeeded; ``recharge_failed`` counts a failure and, at the third in a row,
turns auto-recharge off and raises an alert (``AlertRaised``, kind ``auto_recharge_off``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from domain import auto_recharge
from domain import ledger_events as events
from domain.alerts import alert_id
from domain.ledger_errors import LedgerError
from domain.ledger_state import LedgerState

if TYPE_CHECKING:
    from datetime import datetime
    from uuid import UUID

#: The alert raised when auto-recharge turned itself off.
RECHARGE_OFF = "auto_recharge_off"


class RechargePending(LedgerError):
    """An attempt was asked for while another is pending."""


class TeamRecharge(LedgerState):
    """The auto-recharge commands of the team aggregate (a part of ``TeamLedger``, never used alone)."""

    if TYPE_CHECKING:
        version: int
        id: UUID

        def now(self) -> datetime: ...

        def trigger_event(self, event_class: Any, **kwargs: Any) -> None: ...

    def set_auto_recharge(
        self, threshold: int, target: int, monthly_cap: int, *, enabled: bool = True, actor: str = "", reason: str = ""
    ) -> None:
        """Set (or, ``enabled`` False, turn off) auto-recharge; a failure count starts again.
        Turned off with no figures given, it keeps the ones it had (to turn it on again as it was)."""
        before = self.recharge
        if not enabled and before is not None and not (threshold or target or monthly_cap):
            threshold, target, monthly_cap = before.threshold, before.target, before.monthly_cap
        if enabled:
            auto_recharge.check_settings(threshold, target, monthly_cap)
        self.trigger_event(
            events.AutoRechargeSet,
            threshold=threshold,
            target=target,
            monthly_cap=monthly_cap,
            enabled=enabled,
            actor=actor,
            reason=reason,
        )

    def recharge_due(self) -> int:
        """What an attempt begun now would ask for (0: none is due)."""
        return auto_recharge.amount_due(self.recharge, self.available, self.now())

    def begin_recharge(self) -> tuple[str, int] | None:
        """Begin the attempt due now, if one is: its id and amount (None: none is due)."""
        if self.recharge is not None and self.recharge.pending:
            raise RechargePending(f"team {self.name!r} has auto-recharge attempt {self.recharge.pending!r} pending")
        amount = self.recharge_due()
        if not amount:
            return None
        attempt = f"recharge-{self.id.hex[:12]}-{self.version + 1}"
        self.trigger_event(events.RechargeStarted, attempt=attempt, amount=amount)
        return attempt, amount

    def begin_recharge_if_due(self) -> None:
        """Begin an attempt if one is due (a charge or a lease just took the available balance under
        the threshold): called by the commands that take credit, so the attempt is recorded with
        the charge that made it due, in the same commit, on whichever process charged."""
        recharge = self.recharge
        if recharge is not None and recharge.enabled and not recharge.pending and self.recharge_due():
            self.begin_recharge()

    def recharge_failed(self, attempt: str, why: str) -> bool:
        """Record that the attempt's payment failed (once); returns whether auto-recharge is still on."""
        recharge = self.recharge
        if recharge is None or recharge.pending != attempt:
            return recharge is not None and recharge.enabled
        off = recharge.failures + 1 >= auto_recharge.MAX_FAILURES
        self.trigger_event(events.RechargeFailed, attempt=attempt, reason=why, turned_off=off)
        if off:
            self.trigger_event(
                events.AlertRaised,
                alert_id=alert_id(self.id, self.version + 1),
                key_id="",
                kind=RECHARGE_OFF,
                threshold=str(auto_recharge.MAX_FAILURES),
                value=self.available,
                limit=recharge.threshold,
                period="",
                request_id=attempt,
            )
        return not off
