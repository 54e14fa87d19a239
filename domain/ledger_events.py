"""The facts of a team's ledger, named in the past tense, and how each moves its state.

Every fact about a team's money is an event: the team was opened, credits were added, a key was
issued, a hold was placed before a request went upstream, the request was charged (which also
closes its hold), or the hold was released because nothing was delivered. An event's ``apply``
only moves the state (``domain/ledger_state.py``); the commands that decide to record one, and
check their guards first, are the aggregate's (``domain/ledger.py``).

The classes here are the events' definitions. The aggregate names each of them (``TeamLedger.Charged``)
and records and reads it under that name: the stored topic is ``domain.ledger:TeamLedger.Charged``,
as it was when the events were defined inside the aggregate's class, so every ledger written
before reads the same. So an event is always triggered, and compared by type, as
``TeamLedger.<Name>``, never as the class defined here.
"""

from __future__ import annotations

from dataclasses import field
from datetime import datetime
from decimal import Decimal
from typing import ClassVar

from eventsourcing.domain import Aggregate
from msgspec.structs import replace

from domain import clock, credit_lot, rerates
from domain import credit_lots as lots
from domain.alerts import Threshold
from domain.auto_recharge import Recharge, month_of
from domain.budgets import Budget, counted, period_names
from domain.ledger_state import ABANDONED, EXPIRED, MAX_REMEMBERED_EXPIRIES, Hold, KeyPolicy, LedgerState, Payment
from domain.pricing import PriceRecord
from domain.usage import UsageRecord


class Opened(Aggregate.Created):
    name: str
    #: Who caused an operator's event (``admin:<key id>``, ``admin:config``, ``cli:user@host``) and
    #: why; events recorded before actors were kept lack them.
    actor: str = ""
    reason: str = ""

    @staticmethod
    def create_timestamp() -> datetime:
        """A team opens at the ledger clock's instant, as every later event of it is recorded (``now``)."""
        return clock.now()


class CreditsAdded(Aggregate.Event):
    """Credit came in as a lot of its own (``domain/credit_lots.py``): its id, kind, expiry (ISO
    8601, ``""``: never) and priority. Events recorded before lots lack them: their credit is the
    legacy lot's. ``owed_paid`` of it paid first what the team owed (the balance grows by the rest).
    A payment's credit names it (``payment_intent``, and the provider's other ids in ``payment``)."""

    amount: int
    reference: str
    balance_after: int
    actor: str = ""
    reason: str = ""
    lot: str = ""
    kind: str = ""
    expires: str = ""
    priority: int = credit_lot.DEFAULT_PRIORITY
    owed_paid: int = 0
    payment_intent: str = ""
    payment: dict[str, str] | None = None
    #: The auto-recharge attempt this payment settles (``""``: none).
    recharge: str = ""

    def apply(self, team: LedgerState) -> None:
        team.balance += self.amount - self.owed_paid
        team.owed -= self.owed_paid
        if self.payment_intent:
            team.payments[self.payment_intent] = Payment(self.lot, self.amount)
        if self.recharge and team.recharge is not None and team.recharge.pending == self.recharge:
            team.recharge = replace(team.recharge, pending="", pending_amount=0, failures=0, failed_at=0.0)
        if self.lot:
            expires = datetime.fromisoformat(self.expires).timestamp() if self.expires else None
            lots.credited(team.lots, self.lot, _new_lot(self, self.kind, expires, self.priority))
            if expires is not None:
                team.next_expiry = lots.next_expiry(team.lots)
        else:
            lots.credited(team.lots, lots.LEGACY, lots.legacy_lot(self.amount))


class KeyIssued(Aggregate.Event):
    key_id: str
    key_hash: str
    label: str
    actor: str = ""
    reason: str = ""

    def apply(self, team: LedgerState) -> None:
        team.policy_version = self.originator_version
        team.keys[self.key_id] = KeyPolicy(self.key_hash, self.label)


class KeyRevoked(Aggregate.Event):
    key_id: str
    actor: str = ""
    reason: str = ""

    def apply(self, team: LedgerState) -> None:
        team.policy_version = self.originator_version
        team.keys[self.key_id] = replace(team.keys[self.key_id], revoked=True)


class KeyModelsRestricted(Aggregate.Event):
    """The key may use only these models from now on (an empty list lifts the restriction)."""

    key_id: str
    models: list[str]
    actor: str = ""
    reason: str = ""

    def apply(self, team: LedgerState) -> None:
        team.policy_version = self.originator_version
        team.keys[self.key_id] = replace(team.keys[self.key_id], models=tuple(self.models))


class KeyEndpointsRestricted(Aggregate.Event):
    """The key may call only these endpoints from now on (an empty list lifts the restriction)."""

    key_id: str
    endpoints: list[str]
    actor: str = ""
    reason: str = ""

    def apply(self, team: LedgerState) -> None:
        team.policy_version = self.originator_version
        team.keys[self.key_id] = replace(team.keys[self.key_id], endpoints=tuple(self.endpoints))


class KeyLimitsSet(Aggregate.Event):
    """The key's own rate limits, per minute (``None``: no limit of that kind)."""

    key_id: str
    rpm: int | None
    tpm: int | None
    actor: str = ""
    reason: str = ""

    def apply(self, team: LedgerState) -> None:
        team.policy_version = self.originator_version
        team.keys[self.key_id] = replace(team.keys[self.key_id], rpm=self.rpm, tpm=self.tpm)


class TeamLimitsSet(Aggregate.Event):
    """Rate limits shared by all the team's keys, per minute (``None``: no limit of that kind)."""

    rpm: int | None
    tpm: int | None
    actor: str = ""
    reason: str = ""

    def apply(self, team: LedgerState) -> None:
        team.policy_version = self.originator_version
        team.rpm, team.tpm = self.rpm, self.tpm


class Suspended(Aggregate.Event):
    """The team may not make requests until reinstated; its credits and history are untouched."""

    reason: str
    actor: str = ""

    def apply(self, team: LedgerState) -> None:
        team.policy_version = self.originator_version
        team.suspended = True


class Reinstated(Aggregate.Event):
    actor: str = ""
    reason: str = ""

    def apply(self, team: LedgerState) -> None:
        team.policy_version = self.originator_version
        team.suspended = False


class HoldPlaced(Aggregate.Event):
    request_id: str
    amount: int
    key_id: str
    model: str
    endpoint: str
    #: The gateway process holding it (its instance id): if that process stops answering, any
    #: other releases the hold. Events recorded before owners lack it.
    owner: str = ""
    #: The client's Idempotency-Key, if it sent one: no other request under the key is served
    #: while this hold is open.
    idem_key: str = ""
    #: The hold of a batch (``request_id`` is the batch's id): every line's worst case at the batch
    #: price, its lines charged against it one by one, the rest released when the batch settles.
    batch: bool = False

    def apply(self, team: LedgerState) -> None:
        team.holds[self.request_id] = Hold(
            self.amount, self.timestamp.timestamp(), self.key_id, self.owner, self.idem_key, self.batch
        )
        team.held += self.amount
        team.key_held[self.key_id] = team.key_held.get(self.key_id, 0) + self.amount
        if self.idem_key:
            team.idem_holds[self.idem_key] = self.request_id


class Charged(Aggregate.Event):
    """A request was served: its cost is debited and its hold closed, in one fact.

    ``cost`` is what ``usage`` at ``price`` comes to; ``charged`` is what was debited. They differ
    only if the upstream reported more than the hold covered and the team could not pay the
    rest: the shortfall is kept as ``uncollected`` rather than overdrawing the account.
    """

    request_id: str
    key_id: str
    model: str
    endpoint: str
    #: What the request used, and the rates it was billed at (its tier's, or the long-context ones,
    #: with the tool fees): stored as the plain JSON objects they always were, typed for their readers.
    usage: UsageRecord
    price: PriceRecord
    credits_per_usd: str
    cost: int
    charged: int
    uncollected: int
    hold: int
    balance_after: int
    #: Set when the request was held in a process's memory against this lease (``hold`` is
    #: then what the charge took from the lease). Events recorded before leases lack it.
    lease: str = ""
    #: Why ``price`` (``base``, ``tier:flex``, ``long_context``…); events recorded before lack it.
    basis: str = ""
    #: The price list entry in force, ``MODEL@VERSION`` of the price list (``domain/prices.py``).
    price_ref: str = ""
    #: The team's price adjustment applied on top, in percent (``""``: none).
    adjustment: str = ""
    #: The request's attribution tags (``x-tollgate-tags``: name → value), bounded in size and count.
    tags: dict[str, str] = field(default_factory=dict)
    #: The end user the request was made for (``user``, or ``metadata.user_id``; ``""``: not said).
    end_user: str = ""
    #: What the key's budget has left this period after this charge (None: the key has none).
    key_budget_left: int | None = None
    #: A batch line's charge: the batch (whose hold ``lease`` is) and the line's ``custom_id``.
    batch_id: str = ""
    custom_id: str = ""
    #: The credit lots ``charged`` was taken from (lot id → micro-credits), in the drawing order of
    #: ``domain/credit_lots.py``; charges recorded before lots lack it (the legacy lot paid them).
    drawn: dict[str, int] | None = None

    def apply(self, team: LedgerState) -> None:
        if self.lease:
            lease = team.holds.get(self.lease)
            if lease is not None:  # a lease in use is alive: its time is the charge's
                team.holds[self.lease] = replace(
                    lease, amount=lease.amount - self.hold, placed=self.timestamp.timestamp()
                )
                if lease.key_id is not None and self.hold:  # a batch's hold counts against its key
                    if (still := team.key_held.get(lease.key_id, 0) - self.hold) > 0:
                        team.key_held[lease.key_id] = still
                    else:
                        team.key_held.pop(lease.key_id, None)
            team.lease_charges[self.request_id] = None
            while len(team.lease_charges) > MAX_REMEMBERED_EXPIRIES:
                team.lease_charges.pop(next(iter(team.lease_charges)))
        elif self.request_id in team.holds:
            team.close_hold(self.request_id)
        else:  # a late charge: its hold had expired
            team.expired.pop(self.request_id, None)
        team.held -= self.hold
        team.balance -= self.charged
        if self.charged:
            _take(team, self.charged, self.drawn or lots.draw(team.lots, self.charged))
            names = period_names(self.timestamp)
            for scope in (self.key_id, ""):  # the key's spend, and the team's
                team.spend[scope] = counted(team.spend.get(scope), self.charged, names)


class CreditsExpired(Aggregate.Event):
    """What was left of a credit lot was written off at its expiry (or, for the part open holds
    still counted on, once they closed): recorded before any later event of the team."""

    lot: str
    amount: int
    balance_after: int

    def apply(self, team: LedgerState) -> None:
        team.balance -= self.amount
        _take(team, self.amount, {self.lot: self.amount})


class _Reversed(Aggregate.Event):
    """A payment's credit taken back (``domain/ledger_payments.py``): ``amount`` of it, of which the
    balance gave ``taken`` (from the lots in ``drawn``) and the team owes the rest (``owed_added``).
    ``counted_as``: the payment's total it adds to (``refunded``, ``disputed``)."""

    counted_as: ClassVar[str]

    payment_intent: str
    reversal_id: str
    amount: int
    taken: int
    drawn: dict[str, int]
    owed_added: int
    balance_after: int
    actor: str = ""

    def apply(self, team: LedgerState) -> None:
        team.balance -= self.taken
        _take(team, self.taken, self.drawn)
        team.owed += self.owed_added
        payment = team.payments[self.payment_intent]
        total = getattr(payment, self.counted_as) + self.amount
        reversals = (*payment.reversals, self.reversal_id)
        team.payments[self.payment_intent] = replace(payment, reversals=reversals, **{self.counted_as: total})


class PaymentRefunded(_Reversed):
    """A refund of the payment (``reversal_id``: the provider's refund id) took its credit back."""

    counted_as: ClassVar[str] = "refunded"


class DisputeOpened(_Reversed):
    """A dispute of the payment (``reversal_id``: the provider's dispute id) holds its credit."""

    counted_as: ClassVar[str] = "disputed"


class DisputeClosed(Aggregate.Event):
    """The dispute ended: ``won``, its credit (``amount``) came back as a paid lot (``lot``; what the
    team owed paid first, ``owed_paid``); lost, nothing came back."""

    payment_intent: str
    dispute_id: str
    won: bool
    amount: int
    lot: str
    owed_paid: int
    balance_after: int
    actor: str = ""

    def apply(self, team: LedgerState) -> None:
        team.balance += self.amount - self.owed_paid
        team.owed -= self.owed_paid
        payment = team.payments[self.payment_intent]
        closed = (*payment.reversals, f"{self.dispute_id}:closed")
        team.payments[self.payment_intent] = replace(payment, disputed=payment.disputed - self.amount, reversals=closed)
        if self.lot:
            at = self.timestamp.timestamp()
            lot = credit_lot.Lot(lots.PAID, self.amount, self.amount - self.owed_paid, at, seq=self.originator_version)
            lots.credited(team.lots, self.lot, lot)


class AutoRechargeSet(Aggregate.Event):
    """Auto-recharge set (``domain/auto_recharge.py``) or, ``enabled`` False, turned off."""

    threshold: int
    target: int
    monthly_cap: int
    enabled: bool
    actor: str = ""
    reason: str = ""

    def apply(self, team: LedgerState) -> None:
        team.policy_version = self.originator_version
        before = team.recharge
        team.recharge = Recharge(
            self.threshold,
            self.target,
            self.monthly_cap,
            self.enabled,
            pending=before.pending if before is not None else "",
            pending_amount=before.pending_amount if before is not None else 0,
            month=before.month if before is not None else "",
            month_total=before.month_total if before is not None else 0,
        )


class RechargeStarted(Aggregate.Event):
    """An auto-recharge attempt began: the gateway creates its payment (``attempt`` its idempotency key)."""

    attempt: str
    amount: int

    def apply(self, team: LedgerState) -> None:
        recharge = team.recharge
        assert recharge is not None
        month = month_of(self.timestamp)
        total = (recharge.month_total if recharge.month == month else 0) + self.amount
        team.recharge = replace(
            recharge, pending=self.attempt, pending_amount=self.amount, month=month, month_total=total
        )


class RechargeFailed(Aggregate.Event):
    """The attempt's payment failed; at the third in a row auto-recharge turned itself off."""

    attempt: str
    reason: str
    turned_off: bool

    def apply(self, team: LedgerState) -> None:
        recharge = team.recharge
        assert recharge is not None
        team.recharge = replace(
            recharge,
            pending="",
            pending_amount=0,
            failures=recharge.failures + 1,
            enabled=recharge.enabled and not self.turned_off,
            failed_at=self.timestamp.timestamp(),
        )


def _new_lot(
    event: CreditsAdded | CreditsAdjusted,
    kind: str,
    expires: float | None = None,
    priority: int = credit_lot.DEFAULT_PRIORITY,
) -> credit_lot.Lot:
    """The lot a credit event adds: its amount, less what it paid of what was owed."""
    return credit_lot.Lot(
        kind,
        event.amount,
        event.amount - event.owed_paid,
        event.timestamp.timestamp(),
        expires,
        priority,
        event.originator_version,
        event.reference,
    )


def _take(team: LedgerState, amount: int, drawn: dict[str, int]) -> None:
    """Take ``drawn`` from the team's lots (``amount`` in all: what the balance lost, which the lots
    always cover; ``ledger verify`` checks they add up)."""
    lots.taken(team.lots, drawn)
    if team.next_expiry is not None:
        team.next_expiry = lots.next_expiry(team.lots)


class CreditsLeased(Aggregate.Event):
    """A gateway process set part of the available balance aside, to hold its requests against in
    memory: each request then needs one durable write (its charge) instead of two. The lease is
    a hold like any other — counted in ``held``, released whole when returned or expired."""

    lease: str
    amount: int
    #: The gateway process the lease belongs to (see ``HoldPlaced.owner``).
    owner: str = ""

    def apply(self, team: LedgerState) -> None:
        lease = team.holds.get(self.lease)
        placed = self.timestamp.timestamp()
        team.holds[self.lease] = (
            Hold(self.amount, placed, owner=self.owner)
            if lease is None
            else replace(lease, amount=lease.amount + self.amount, placed=placed, owner=self.owner or lease.owner)
        )
        team.held += self.amount


class RequestFailed(Aggregate.Event):
    """A request held against a lease was not served (nothing delivered): no money moved, but
    every request leaves a fact in the ledger."""

    request_id: str
    lease: str
    key_id: str
    model: str
    endpoint: str
    reason: str

    def apply(self, team: LedgerState) -> None:
        pass


class HoldReleased(Aggregate.Event):
    request_id: str
    amount: int
    reason: str

    def apply(self, team: LedgerState) -> None:
        team.close_hold(self.request_id)
        team.held -= self.amount
        if self.reason in (EXPIRED, ABANDONED):
            team.expired[self.request_id] = self.amount
            while len(team.expired) > MAX_REMEMBERED_EXPIRIES:
                team.expired.pop(next(iter(team.expired)))


class CreditsAdjusted(Aggregate.Event):
    """Credits given back (``amount`` > 0) or taken (< 0) by an operator's correction, such as
    a re-rating of past charges: a fact of its own, never an edit of the charges it corrects."""

    amount: int
    reason: str
    reference: str
    balance_after: int
    actor: str = ""
    #: Credit given back is a lot of its own (an adjustment, never expiring); credit taken is drawn
    #: from the lots as a charge is (lot id → micro-credits). Events from before lots lack both.
    lot: str = ""
    drawn: dict[str, int] | None = None
    owed_paid: int = 0

    def apply(self, team: LedgerState) -> None:
        team.balance += self.amount - self.owed_paid
        team.owed -= self.owed_paid
        if self.amount > 0:
            lot_id = self.lot or lots.LEGACY
            lot = _new_lot(self, lots.ADJUSTMENT) if self.lot else lots.legacy_lot(self.amount)
            lots.credited(team.lots, lot_id, lot)
        else:
            _take(team, -self.amount, self.drawn or lots.draw(team.lots, -self.amount))
        if self.reference:
            team.adjustment_references[self.reference] = None
            if self.reference.startswith(rerates.PREFIX):
                rerates.with_legacy(team.rerates, self.reference)  # a re-rate's, from before ``Rerated``


class Rerated(Aggregate.Event):
    """The team's charges of ``models`` in ``[start, end)`` (UTC) were re-rated at the price list
    whose canonical form's digest is ``prices`` (``domain/rerates.py``); the adjustments that
    follow it, under ``reference:MODEL:KEY``, move the money. No re-rate of the same models may
    overlap it."""

    reference: str
    start: str
    end: str
    models: list[str]
    prices: str
    actor: str = ""
    reason: str = ""

    def apply(self, team: LedgerState) -> None:
        team.rerates[self.reference] = {
            "from": self.start,
            "to": self.end,
            "models": list(self.models),
            "at": self.timestamp.isoformat(),
            "actor": self.actor,
        }


class PricesAdjusted(Aggregate.Event):
    """The team's prices are ``percent`` above (a markup) or below (a discount) the price list,
    for ``model`` (``""``: every model without an adjustment of its own); ``"0"`` ends it."""

    model: str
    percent: str
    reason: str
    actor: str = ""

    def apply(self, team: LedgerState) -> None:
        team.policy_version = self.originator_version
        if Decimal(self.percent):
            team.price_adjustments[self.model] = self.percent
        else:
            team.price_adjustments.pop(self.model, None)


class OutputClampSet(Aggregate.Event):
    """Whether a request the available balance cannot cover has its output limit lowered to
    what the balance covers, instead of being refused: for the key ``key_id``, or for every key
    of the team (``key_id`` empty)."""

    key_id: str
    enabled: bool
    actor: str = ""
    reason: str = ""

    def apply(self, team: LedgerState) -> None:
        team.policy_version = self.originator_version
        if self.key_id:
            team.keys[self.key_id] = replace(team.keys[self.key_id], clamp=self.enabled)
        else:
            team.clamp_output = self.enabled


class BudgetSet(Aggregate.Event):
    """The key ``key_id`` (or, ``key_id`` empty, the whole team) may spend at most ``limit``
    micro-credits per ``period`` (``day``, ``week``, ``month``: UTC calendar periods; ``none``:
    in all); a ``limit`` of None lifts the budget."""

    key_id: str
    limit: int | None
    period: str
    actor: str = ""
    reason: str = ""

    def apply(self, team: LedgerState) -> None:
        team.policy_version = self.originator_version
        budget = Budget(self.limit, self.period) if self.limit is not None else None
        if self.key_id:
            team.keys[self.key_id] = replace(team.keys[self.key_id], budget=budget)
        else:
            team.budget = budget


class AlertThresholdSet(Aggregate.Event):
    """An alert at ``value`` of ``kind`` (``domain/alerts.py``) for the key ``key_id`` (empty: the
    team) is set (``enabled``) or removed."""

    key_id: str
    kind: str
    value: str
    enabled: bool
    actor: str = ""
    reason: str = ""

    def apply(self, team: LedgerState) -> None:
        threshold = Threshold(self.key_id, self.kind, self.value)
        if self.enabled:
            team.alert_thresholds[threshold.name] = threshold.as_record()
        else:
            team.alert_thresholds.pop(threshold.name, None)


class AlertRaised(Aggregate.Event):
    """A charge (``request_id``) or a correction crossed a threshold: the budget of ``key_id``
    (empty: the team's) reached ``threshold`` percent of ``limit`` with ``value`` spent in
    ``period``, or the balance fell to ``value``, under ``threshold``. Delivered to the webhooks
    from an outbox fed by these events, under ``alert_id``."""

    alert_id: str
    key_id: str
    kind: str
    threshold: str
    value: int
    limit: int
    period: str
    request_id: str

    def apply(self, team: LedgerState) -> None:
        pass
