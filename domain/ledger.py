"""The team ledger: one event-sourced aggregate per team, holding its prepaid credits.

The aggregate is three parts: its state (``domain/ledger_state.py``: the balance, each open hold and
each key as a typed record), its events (``domain/ledger_events.py``: every fact about the team's
money, in the past tense, and how it moves the state), and its commands: top-ups, corrections and
the alerts they raise here, the request path's holds, charges and leases in ``domain/ledger_holds.py``,
the operators' policies in ``domain/ledger_policies.py``. Events are recorded, and stored, under this
class's name (``domain.ledger:TeamLedger.Charged``); a snapshot's older state is upcast
(``domain/ledger_upcasts.py``).

Commands check their guards *before* recording an event, so replaying history never re-judges old
facts by today's rules; the events' ``apply`` methods only move numbers. Balances move by the amounts
in the events, and every event that changes the balance also records ``balance_after``: replaying
the amounts and comparing with the recorded balances is how ``tollgate ledger verify`` proves the
history is whole.

Invariant, at every version: ``0 <= held <= balance``, i.e. available = balance − held ≥ 0.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeAlias
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate

from domain import clock, ledger_upcasts, rerates
from domain import credit_lots as lots
from domain import ledger_events as events
from domain.alerts import BALANCE_BELOW, Threshold, alert_id, budget_line, crossed_down, crossed_up
from domain.bounds import AMOUNT
from domain.budgets import period_of, spent_in
from domain.ledger_errors import (
    AlreadyCharged,
    BudgetExceeded,
    HoldNotFound,
    InsufficientCredits,
    InvalidAmount,
    InvalidTeamName,
    KeyNotFound,
    LedgerError,
    RequestInProgress,
    TeamAlreadyExists,
    TeamNotFound,
    TeamSuspended,
)
from domain.ledger_holds import Delivery, RequestOnLedger, TeamHolds
from domain.ledger_payments import PaymentFacts, TeamPayments
from domain.ledger_recharge import TeamRecharge
from domain.ledger_state import ABANDONED, EXPIRED, STATE_VERSION, check_positive
from domain.money import format_credits

__all__ = [
    "ABANDONED",
    "EXPIRED",
    "TEAM_NAME",
    "AlreadyCharged",
    "BudgetExceeded",
    "Delivery",
    "HoldNotFound",
    "InsufficientCredits",
    "InvalidAmount",
    "InvalidTeamName",
    "KeyNotFound",
    "LedgerError",
    "RequestInProgress",
    "RequestOnLedger",
    "TeamAlreadyExists",
    "TeamLedger",
    "TeamNotFound",
    "TeamSuspended",
    "team_id",
]

#: A team's name: matched whole (``fullmatch``), so no trailing newline slips through to headers and logs.
TEAM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: The most micro-credits a balance may hold: the read models and the history keep amounts in
#: signed 64-bit integers (about 9.2 trillion credits).
MAX_BALANCE = 2**63 - 1


def team_id(name: str) -> UUID:
    """A team's aggregate id, derived from its name: no lookup table is needed to find a team."""
    return uuid5(NAMESPACE_URL, f"tollgate:team/{name}")


class TeamLedger(TeamRecharge, TeamPayments, TeamHolds, Aggregate):
    """A team's prepaid credit account (amounts in integer micro-credits)."""

    # The events (``domain/ledger_events.py``), recorded and read as this class's: the aggregate's
    # metaclass makes each a subclass of its own event class, named ``TeamLedger.<Name>`` in this
    # module, which is the topic they are stored under. (mypy reads the names as aliases.)
    if TYPE_CHECKING:
        Opened: TypeAlias = events.Opened
        CreditsAdded: TypeAlias = events.CreditsAdded
        KeyIssued: TypeAlias = events.KeyIssued
        KeyRevoked: TypeAlias = events.KeyRevoked
        KeyModelsRestricted: TypeAlias = events.KeyModelsRestricted
        KeyEndpointsRestricted: TypeAlias = events.KeyEndpointsRestricted
        KeyLimitsSet: TypeAlias = events.KeyLimitsSet
        TeamLimitsSet: TypeAlias = events.TeamLimitsSet
        Suspended: TypeAlias = events.Suspended
        Reinstated: TypeAlias = events.Reinstated
        HoldPlaced: TypeAlias = events.HoldPlaced
        Charged: TypeAlias = events.Charged
        CreditsLeased: TypeAlias = events.CreditsLeased
        RequestFailed: TypeAlias = events.RequestFailed
        HoldReleased: TypeAlias = events.HoldReleased
        CreditsAdjusted: TypeAlias = events.CreditsAdjusted
        CreditsExpired: TypeAlias = events.CreditsExpired
        PaymentRefunded: TypeAlias = events.PaymentRefunded
        DisputeOpened: TypeAlias = events.DisputeOpened
        DisputeClosed: TypeAlias = events.DisputeClosed
        AutoRechargeSet: TypeAlias = events.AutoRechargeSet
        RechargeStarted: TypeAlias = events.RechargeStarted
        RechargeFailed: TypeAlias = events.RechargeFailed
        Rerated: TypeAlias = events.Rerated
        PricesAdjusted: TypeAlias = events.PricesAdjusted
        OutputClampSet: TypeAlias = events.OutputClampSet
        BudgetSet: TypeAlias = events.BudgetSet
        AlertThresholdSet: TypeAlias = events.AlertThresholdSet
        AlertRaised: TypeAlias = events.AlertRaised
    else:
        Opened = events.Opened
        CreditsAdded = events.CreditsAdded
        KeyIssued = events.KeyIssued
        KeyRevoked = events.KeyRevoked
        KeyModelsRestricted = events.KeyModelsRestricted
        KeyEndpointsRestricted = events.KeyEndpointsRestricted
        KeyLimitsSet = events.KeyLimitsSet
        TeamLimitsSet = events.TeamLimitsSet
        Suspended = events.Suspended
        Reinstated = events.Reinstated
        HoldPlaced = events.HoldPlaced
        Charged = events.Charged
        CreditsLeased = events.CreditsLeased
        RequestFailed = events.RequestFailed
        HoldReleased = events.HoldReleased
        CreditsAdjusted = events.CreditsAdjusted
        CreditsExpired = events.CreditsExpired
        PaymentRefunded = events.PaymentRefunded
        DisputeOpened = events.DisputeOpened
        DisputeClosed = events.DisputeClosed
        AutoRechargeSet = events.AutoRechargeSet
        RechargeStarted = events.RechargeStarted
        RechargeFailed = events.RechargeFailed
        Rerated = events.Rerated
        PricesAdjusted = events.PricesAdjusted
        OutputClampSet = events.OutputClampSet
        BudgetSet = events.BudgetSet
        AlertThresholdSet = events.AlertThresholdSet
        AlertRaised = events.AlertRaised

    #: The state's version, for snapshots: a snapshot of an older state is upcast when read.
    class_version = STATE_VERSION
    upcast_v1_v2 = staticmethod(ledger_upcasts.upcast_v1_v2)
    upcast_v2_v3 = staticmethod(ledger_upcasts.upcast_v2_v3)
    upcast_v3_v4 = staticmethod(ledger_upcasts.upcast_v3_v4)
    upcast_v4_v5 = staticmethod(ledger_upcasts.upcast_v4_v5)
    upcast_v5_v6 = staticmethod(ledger_upcasts.upcast_v5_v6)
    upcast_v6_v7 = staticmethod(ledger_upcasts.upcast_v6_v7)

    @staticmethod
    def create_id(name: str) -> UUID:
        return team_id(name)

    def __init__(self, name: str, actor: str = "", reason: str = "") -> None:
        super().__init__(name)

    # -- commands ---------------------------------------------------------------------------

    @classmethod
    def open(cls, name: str, *, actor: str = "", reason: str = "") -> TeamLedger:
        if not TEAM_NAME.fullmatch(name):
            raise InvalidTeamName(name)
        return cls(name=name, actor=actor, reason=reason)

    def fork(self) -> TeamLedger:
        """A copy to apply commands to, leaving this one as it was.

        The writer applies a batch of commands to a fork; if another process appended to the team
        first, the save is refused and the fork is thrown away, while this copy (still at the last
        version it knew) catches up with just the newer events — instead of replaying the team's
        whole history, which made every conflict cost time in proportion to the team's age. Every
        container an event mutates is copied; what they hold (records, strings, numbers) is immutable."""
        twin = copy.copy(self)
        state = twin.__dict__
        for name, value in self.__dict__.items():
            if isinstance(value, dict):
                state[name] = dict(value)
        state["_pending_events"] = []
        return twin

    def now(self) -> datetime:
        """The instant the team's ledger judges and records at: the ledger clock (``domain/clock.py``),
        but never before the team's latest event. So the team's events are in time order whatever
        the clocks of the processes that record them, a budget's period never goes back to one it
        has left — a period is spent once, even after a process whose clock ran ahead charged in
        it — and no charge falls before what the team's ledger already said."""
        return max(clock.now(), self.modified_on)

    def trigger_event(self, event_class: Any, **kwargs: Any) -> None:
        """Record an event at the team's instant (:meth:`now`) unless the command gave one. An event
        named by its definition (``ledger_events.KeyIssued``) is recorded as the aggregate's of that
        name (``TeamLedger.KeyIssued``), whose topic the stored events are read by."""
        if kwargs.get("timestamp") is None:
            kwargs["timestamp"] = self.now()
        if event_class is not events.CreditsExpired:
            self.expire_lots(kwargs["timestamp"])
        super().trigger_event(getattr(TeamLedger, event_class.__name__), **kwargs)

    def expire_lots(self, at: datetime) -> None:
        """Write off what is left of each lot expired by ``at``, at its expiry instant (never before
        the team's latest event), as far as open holds do not count on it: the rest once they close.
        Every command's events are recorded after this, so no event ever follows a due expiry."""
        if self.next_expiry is None or self.next_expiry > at.timestamp():
            return
        due = sorted(
            (lot.expires, lot_id)
            for lot_id, lot in self.lots.items()
            if lot.expires is not None and lot.expired_at(at.timestamp()) and lot.remaining
        )
        for expires, lot_id in due:
            amount = min(self.lots[lot_id].remaining, self.balance - self.held)
            if amount > 0:
                instant = max(datetime.fromtimestamp(expires, UTC), self.modified_on)
                self.trigger_event(
                    events.CreditsExpired,
                    timestamp=instant,
                    lot=lot_id,
                    amount=amount,
                    balance_after=self.balance - amount,
                )

    def add_credits(
        self,
        amount: int,
        reference: str = "",
        *,
        actor: str = "",
        reason: str = "",
        terms: lots.LotTerms = lots.PAID_FOREVER,
        payment: PaymentFacts | None = None,
    ) -> int:
        """Top up the balance with a lot of credit on ``terms`` (``domain/credit_lots.py``: its
        kind, expiry and priority); returns the balance after."""
        check_positive(amount, "a top-up")
        AMOUNT.check(amount)
        at = self.now()
        terms.check(at)
        expires = terms.expires
        self.expire_lots(at)
        if amount > MAX_BALANCE - self.balance:
            raise InvalidAmount(
                f"a top-up of {amount} micro-credits would take team {self.name!r}'s balance past "
                f"the most a ledger can hold ({MAX_BALANCE} micro-credits)"
            )
        owed_paid = min(self.owed, amount)
        self.trigger_event(
            self.CreditsAdded,
            timestamp=at,
            amount=amount,
            reference=reference,
            balance_after=self.balance + amount - owed_paid,
            actor=actor,
            reason=reason,
            lot=f"lot-{self.version + 1}",
            kind=terms.kind,
            expires=expires.astimezone(UTC).isoformat() if expires is not None else "",
            priority=terms.priority,
            owed_paid=owed_paid,
            payment_intent=payment.payment_intent if payment is not None else "",
            payment=payment.record() if payment is not None else None,
            recharge=payment.recharge if payment is not None else "",
        )
        return self.balance

    def adjust_credits(self, amount: int, reason: str, reference: str = "", *, actor: str = "") -> int:
        """Give credits back (``amount`` > 0) or take them (< 0) as a correction; returns the balance
        after. A correction takes no more than is available (held credits belong to requests)."""
        if not isinstance(amount, int) or isinstance(amount, bool) or amount == 0:
            raise InvalidAmount(f"an adjustment must be a non-zero number of micro-credits, got {amount!r}")
        AMOUNT.check(abs(amount))
        if not reason.strip():
            raise LedgerError("an adjustment must say why (a reason)")
        at = self.now()
        self.expire_lots(at)
        if amount > MAX_BALANCE - self.balance:
            raise InvalidAmount(
                f"an adjustment of {amount} micro-credits would take team {self.name!r}'s balance "
                f"past the most a ledger can hold"
            )
        if -amount > self.available:
            raise InvalidAmount(
                f"team {self.name!r} has {format_credits(self.available)} credits available: an "
                f"adjustment cannot take {format_credits(-amount)} (what requests hold is theirs)"
            )
        if reference and reference in self.adjustment_references:
            raise LedgerError(f"team {self.name!r} already has an adjustment under the reference {reference!r}")
        owed_paid = min(self.owed, amount) if amount > 0 else 0
        self.trigger_event(
            self.CreditsAdjusted,
            timestamp=at,
            amount=amount,
            reason=reason,
            reference=reference,
            balance_after=self.balance + amount - owed_paid,
            actor=actor,
            lot=f"lot-{self.version + 1}" if amount > 0 else "",
            drawn=lots.draw(self.lots, -amount) if amount < 0 else None,
            owed_paid=owed_paid,
        )
        if self.alert_thresholds and amount < 0:
            self._raise_alerts(0, self.balance - amount, self.now(), "", "")
        return self.balance

    def apply_rerate(
        self,
        scope: rerates.RerateScope,
        lines: Sequence[tuple[str, str, int]],
        *,
        through_version: int | None,
        actor: str = "",
        reason: str = "",
    ) -> list[int]:
        """Record the re-rate ``scope`` and its adjustments ``(model, key id, amount)`` (a refund > 0, a
        debit < 0), refunds first, a debit taking no more than is available; returns what each moved,
        in the order given. Refused (``RerateRefused``) if its period has not ended or overlaps an
        applied re-rate of the same models; ``RerateRaced`` if ``through_version`` (the version the
        re-rate was computed through, when nothing after its period was seen yet) is not the team's."""
        if through_version is not None and through_version != self.version:
            raise rerates.RerateRaced(
                f"team {self.name!r} recorded events while the re-rate was computed; run it again"
            )
        problem = rerates.refusal(self.rerates, scope, self.name, self.now())
        if problem is not None:
            raise rerates.RerateRefused(problem)
        moved = dict.fromkeys(range(len(lines)), 0)
        if not any(amount for _, _, amount in lines):
            return list(moved.values())
        self.trigger_event(
            self.Rerated,
            reference=scope.reference,
            start=scope.start.isoformat(),
            end=scope.end.isoformat(),
            models=list(scope.models),
            prices=scope.prices,
            actor=actor,
            reason=reason,
        )
        for i in sorted(moved, key=lambda i: -lines[i][2]):  # refunds first: a debit may take from them
            model, key_id, amount = lines[i]
            moved[i] = max(amount, -self.available)
            if moved[i]:
                why = f"re-rated {scope.start.isoformat()} to {scope.end.isoformat()} ({model}, {key_id})"
                self.adjust_credits(
                    moved[i], f"{why}: {reason}" if reason else why, f"{scope.reference}:{model}:{key_id}", actor=actor
                )
        return list(moved.values())

    def _raise_alerts(self, charged: int, balance_before: int, at: datetime, key_id: str, request_id: str) -> None:
        """Record an alert for each threshold the money just moved crossed (``charged`` by the key
        ``key_id``'s request ``request_id``; the balance from ``balance_before``)."""
        for record in list(self.alert_thresholds.values()):
            t = Threshold.from_record(record)
            if t.kind == BALANCE_BELOW:
                if crossed_down(balance_before, self.balance, Decimal(t.value)):
                    self._alert(t, self.balance, 0, "", request_id)
                continue
            budget = self.budget_of(t.key_id) if (not t.key_id or t.key_id == key_id) and charged else None
            if budget is None:
                continue
            after = spent_in(self.spend.get(t.key_id), budget.period, at)
            if crossed_up(after - charged, after, budget_line(budget.limit, t.value)):
                self._alert(t, after, budget.limit, period_of(budget.period, at), request_id)

    def _alert(self, t: Threshold, value: int, limit: int, period: str, request_id: str) -> None:
        self.trigger_event(
            self.AlertRaised,
            alert_id=alert_id(self.id, self.version + 1),
            key_id=t.key_id,
            kind=t.kind,
            threshold=t.value,
            value=value,
            limit=limit,
            period=period,
            request_id=request_id,
        )
