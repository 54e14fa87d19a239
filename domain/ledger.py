"""The team ledger: one event-sourced aggregate per team, holding its prepaid credits.

Every fact about a team's money is an event, named in the past tense: the team was opened, credits
were added, a key was issued, a hold was placed before a request went upstream, the request was
charged (which also closes its hold), or the hold was released because nothing was delivered.

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
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, cast
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate

from domain import clock, rerates
from domain.alerts import (
    BALANCE_BELOW,
    Threshold,
    alert_id,
    budget_line,
    check_threshold,
    crossed_down,
    crossed_up,
)
from domain.bounds import AMOUNT, BUDGET, PRICE_ADJUSTMENT_PERCENT, RPM, TPM, Bound, OutOfBounds
from domain.budgets import PERIODS, Budget, counted, period_names, period_of, spent_in
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
from domain.money import format_credits
from domain.prices import PriceSource
from domain.pricing import Cost, Price, TokenUsage, price_usage

__all__ = ["ABANDONED", "EXPIRED", "TEAM_NAME", "AlreadyCharged", "BudgetExceeded", "Delivery", "HoldNotFound",
           "InsufficientCredits", "InvalidAmount", "InvalidTeamName", "KeyNotFound", "LedgerError", "RequestInProgress",
           "TeamAlreadyExists", "TeamLedger", "TeamNotFound", "TeamSuspended", "team_id"]

#: A team's name: matched whole (``fullmatch``), so no trailing newline slips through to headers and logs.
TEAM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
EXPIRED = "expired"
#: The release of a hold whose gateway process stopped answering (``release_abandoned``).
ABANDONED = "abandoned"
#: The most micro-credits a balance may hold: the read models and the history keep amounts in
#: signed 64-bit integers (about 9.2 trillion credits).
MAX_BALANCE = 2**63 - 1
MAX_REMEMBERED_EXPIRIES = 1000
LEASE_SHARE = 4  # a lease grows by at most 1/LEASE_SHARE of the available balance beyond what is needed


def _limit(value: int | None, bound: Bound) -> int | None:
    """A per-minute limit: a whole number in its range (``domain/bounds.py``), or ``None`` (or 0) for none."""
    if value is None or (value == 0 and not isinstance(value, bool)):
        return None
    problem = bound.problem(value)
    if problem is not None:
        raise OutOfBounds(f"{problem} (0 for no limit)")
    return value


@dataclass(frozen=True, slots=True)
class Delivery:
    """What a stream in flight had delivered when its gateway process last reported it."""

    request_id: str
    key_id: str
    model: str
    endpoint: str
    usage: TokenUsage
    lease: str = ""  # the lease it was held against ("": a hold of its own)
    tags: Mapping[str, str] = field(default_factory=dict)  # its attribution, recorded with its charge
    end_user: str = ""


def _price_of(prices: Mapping[str, Price] | PriceSource | None, model: str) -> Price | PriceSource | None:
    """What prices ``model``'s charges: its price in a mapping, or the price list if it has one for it."""
    if prices is None:
        return None
    if isinstance(prices, Mapping):
        return prices.get(model)
    return prices if prices.in_force(model, datetime.now(UTC)) is not None else None


def team_id(name: str) -> UUID:
    """A team's aggregate id, derived from its name: no lookup table is needed to find a team."""
    return uuid5(NAMESPACE_URL, f"tollgate:team/{name}")


class TeamLedger(Aggregate):
    """A team's prepaid credit account (amounts in integer micro-credits)."""

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
        amount: int
        reference: str
        balance_after: int
        actor: str = ""
        reason: str = ""

        def apply(self, team: TeamLedger) -> None:
            team.balance += self.amount

    class KeyIssued(Aggregate.Event):
        key_id: str
        key_hash: str
        label: str
        actor: str = ""
        reason: str = ""

        def apply(self, team: TeamLedger) -> None:
            team.policy_version = self.originator_version
            team.keys[self.key_id] = {"hash": self.key_hash, "label": self.label, "revoked": False}

    class KeyRevoked(Aggregate.Event):
        key_id: str
        actor: str = ""
        reason: str = ""

        def apply(self, team: TeamLedger) -> None:
            team.policy_version = self.originator_version
            team.keys[self.key_id]["revoked"] = True

    class KeyModelsRestricted(Aggregate.Event):
        """The key may use only these models from now on (an empty list lifts the restriction)."""

        key_id: str
        models: list[str]
        actor: str = ""
        reason: str = ""

        def apply(self, team: TeamLedger) -> None:
            team.policy_version = self.originator_version
            team.keys[self.key_id]["models"] = list(self.models)

    class KeyEndpointsRestricted(Aggregate.Event):
        """The key may call only these endpoints from now on (an empty list lifts the restriction)."""

        key_id: str
        endpoints: list[str]
        actor: str = ""
        reason: str = ""

        def apply(self, team: TeamLedger) -> None:
            team.policy_version = self.originator_version
            team.keys[self.key_id]["endpoints"] = list(self.endpoints)

    class KeyLimitsSet(Aggregate.Event):
        """The key's own rate limits, per minute (``None``: no limit of that kind)."""

        key_id: str
        rpm: int | None
        tpm: int | None
        actor: str = ""
        reason: str = ""

        def apply(self, team: TeamLedger) -> None:
            team.policy_version = self.originator_version
            team.keys[self.key_id]["rpm"] = self.rpm
            team.keys[self.key_id]["tpm"] = self.tpm

    class TeamLimitsSet(Aggregate.Event):
        """Rate limits shared by all the team's keys, per minute (``None``: no limit of that kind)."""

        rpm: int | None
        tpm: int | None
        actor: str = ""
        reason: str = ""

        def apply(self, team: TeamLedger) -> None:
            team.policy_version = self.originator_version
            team.rpm, team.tpm = self.rpm, self.tpm

    class Suspended(Aggregate.Event):
        """The team may not make requests until reinstated; its credits and history are untouched."""

        reason: str
        actor: str = ""

        def apply(self, team: TeamLedger) -> None:
            team.policy_version = self.originator_version
            team.suspended = True

    class Reinstated(Aggregate.Event):
        actor: str = ""
        reason: str = ""

        def apply(self, team: TeamLedger) -> None:
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

        def apply(self, team: TeamLedger) -> None:
            team.holds[self.request_id] = self.amount
            team.held += self.amount
            team.hold_times[self.request_id] = self.timestamp.timestamp()
            team.hold_keys[self.request_id] = self.key_id
            team.key_held[self.key_id] = team.key_held.get(self.key_id, 0) + self.amount
            if self.owner:
                team.hold_owners[self.request_id] = self.owner
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
        usage: dict[str, Any]
        #: The rates the request was billed at (its tier's, or the long-context ones), with the tool fees.
        price: dict[str, Any]
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

        def apply(self, team: TeamLedger) -> None:
            if self.lease:
                if self.lease in team.holds:
                    team.holds[self.lease] -= self.hold
                    team.hold_times[self.lease] = self.timestamp.timestamp()  # a lease in use is alive
                team.lease_charges[self.request_id] = None
                while len(team.lease_charges) > MAX_REMEMBERED_EXPIRIES:
                    team.lease_charges.pop(next(iter(team.lease_charges)))
            elif self.request_id in team.holds:
                team._forget_hold(self.request_id, team.holds.pop(self.request_id))
            else:  # a late charge: its hold had expired
                team.expired.pop(self.request_id, None)
            team.held -= self.hold
            team.balance -= self.charged
            if self.charged:
                names = period_names(self.timestamp)
                for scope in (self.key_id, ""):  # the key's spend, and the team's
                    team.spend[scope] = counted(team.spend.get(scope), self.charged, names)

    class CreditsLeased(Aggregate.Event):
        """A gateway process set part of the available balance aside, to hold its requests against in
        memory: each request then needs one durable write (its charge) instead of two. The lease is
        a hold like any other — counted in ``held``, released whole when returned or expired."""

        lease: str
        amount: int
        #: The gateway process the lease belongs to (see ``HoldPlaced.owner``).
        owner: str = ""

        def apply(self, team: TeamLedger) -> None:
            team.holds[self.lease] = team.holds.get(self.lease, 0) + self.amount
            team.hold_times[self.lease] = self.timestamp.timestamp()
            team.held += self.amount
            if self.owner:
                team.hold_owners[self.lease] = self.owner

    class RequestFailed(Aggregate.Event):
        """A request held against a lease was not served (nothing delivered): no money moved, but
        every request leaves a fact in the ledger."""

        request_id: str
        lease: str
        key_id: str
        model: str
        endpoint: str
        reason: str

        def apply(self, team: TeamLedger) -> None:
            pass

    class HoldReleased(Aggregate.Event):
        request_id: str
        amount: int
        reason: str

        def apply(self, team: TeamLedger) -> None:
            team._forget_hold(self.request_id, team.holds.pop(self.request_id))
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

        def apply(self, team: TeamLedger) -> None:
            team.balance += self.amount
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

        def apply(self, team: TeamLedger) -> None:
            team.rerates[self.reference] = {"from": self.start, "to": self.end, "models": list(self.models),
                                            "at": self.timestamp.isoformat(), "actor": self.actor}

    class PricesAdjusted(Aggregate.Event):
        """The team's prices are ``percent`` above (a markup) or below (a discount) the price list,
        for ``model`` (``""``: every model without an adjustment of its own); ``"0"`` ends it."""

        model: str
        percent: str
        reason: str
        actor: str = ""

        def apply(self, team: TeamLedger) -> None:
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

        def apply(self, team: TeamLedger) -> None:
            team.policy_version = self.originator_version
            if self.key_id:
                team.keys[self.key_id]["clamp"] = self.enabled
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

        def apply(self, team: TeamLedger) -> None:
            team.policy_version = self.originator_version
            budget = {"limit": self.limit, "period": self.period} if self.limit is not None else None
            if not self.key_id:
                team.budget = budget
            elif budget is None:
                team.keys[self.key_id].pop("budget", None)
            else:
                team.keys[self.key_id]["budget"] = budget

    class AlertThresholdSet(Aggregate.Event):
        """An alert at ``value`` of ``kind`` (``domain/alerts.py``) for the key ``key_id`` (empty: the
        team) is set (``enabled``) or removed."""

        key_id: str
        kind: str
        value: str
        enabled: bool
        actor: str = ""
        reason: str = ""

        def apply(self, team: TeamLedger) -> None:
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

        def apply(self, team: TeamLedger) -> None:
            pass

    #: The state's version, for snapshots: a snapshot of an older state is upcast when read.
    class_version = 4

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        """A snapshot taken before teams had price adjustments, an output clamp and adjustment
        references: none of their events existed then, so the team had none of them."""
        state.setdefault("price_adjustments", {})
        state.setdefault("clamp_output", False)
        state.setdefault("adjustment_references", {})

    @staticmethod
    def upcast_v2_v3(state: dict[str, Any]) -> None:
        """A snapshot taken before budgets: no budget was set, and the holds then open are not
        counted against any key's (a key's holds are counted from the holds placed since)."""
        state.setdefault("budget", None)
        state.setdefault("spend", {})
        state.setdefault("key_held", {})
        state.setdefault("hold_keys", {})
        state.setdefault("alert_thresholds", {})

    @staticmethod
    def upcast_v3_v4(state: dict[str, Any]) -> None:
        """A snapshot taken before re-rates were events of their own: the re-rates applied until then
        are known by their adjustments' references."""
        applied: dict[str, dict[str, Any]] = {}
        for reference in state.get("adjustment_references", {}):
            rerates.with_legacy(applied, reference)
        state.setdefault("rerates", applied)

    @staticmethod
    def create_id(name: str) -> UUID:
        return team_id(name)

    def __init__(self, name: str, actor: str = "", reason: str = "") -> None:
        self.name = name
        self.balance = 0
        self.held = 0
        self.holds: dict[str, int] = {}
        self.hold_times: dict[str, float] = {}  # request id → when its hold was placed (Unix time)
        self.hold_owners: dict[str, str] = {}  # request or lease id → the gateway process holding it
        self.idem_holds: dict[str, str] = {}  # Idempotency-Key → the request holding it now
        self.expired: dict[str, int] = {}  # holds released as expired, whose request may yet be charged
        self.keys: dict[str, dict[str, Any]] = {}
        self.lease_charges: dict[str, None] = {}  # requests recently charged against a lease, never twice
        self.suspended = False
        self.policy_version = 0  # the version of the last event that changed what the team's keys may do
        self.rpm: int | None = None  # the team's rate limits per minute, shared by its keys
        self.tpm: int | None = None
        self.price_adjustments: dict[str, str] = {}  # model ("": every model) → percent on the price list
        self.clamp_output = False  # the team's keys get what their balance covers instead of 402
        self.adjustment_references: dict[str, None] = {}  # each names one adjustment: none is made twice
        self.budget: dict[str, Any] | None = None  # the team's own budget (``domain/budgets.py``)
        self.spend: dict[str, dict[str, list[Any]]] = {}  # key id ("": the team) → spend per period
        self.key_held: dict[str, int] = {}  # key id → what its requests' holds hold now
        self.hold_keys: dict[str, str] = {}  # request id → the key its hold was placed for
        self.alert_thresholds: dict[str, dict[str, Any]] = {}  # Threshold.name → the threshold (domain/alerts.py)
        self.rerates: dict[str, dict[str, Any]] = {}  # re-rate reference → its period and models (domain/rerates.py)

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
        container an event mutates is copied; the rest is immutable."""
        twin = copy.copy(self)
        state = twin.__dict__
        for name, value in self.__dict__.items():
            if isinstance(value, dict):
                state[name] = dict(value)
        twin.keys = {key_id: dict(key) for key_id, key in self.keys.items()}
        state["_pending_events"] = []
        return twin

    @property
    def available(self) -> int:
        return self.balance - self.held

    def now(self) -> datetime:
        """The instant the team's ledger judges and records at: the ledger clock (``domain/clock.py``),
        but never before the team's latest event. So the team's events are in time order whatever
        the clocks of the processes that record them, a budget's period never goes back to one it
        has left — a period is spent once, even after a process whose clock ran ahead charged in
        it — and no charge falls before what the team's ledger already said."""
        return max(clock.now(), self.modified_on)

    def trigger_event(self, event_class: Any, **kwargs: Any) -> None:
        """Record an event at the team's instant (:meth:`now`) unless the command gave one."""
        if kwargs.get("timestamp") is None:
            kwargs["timestamp"] = self.now()
        super().trigger_event(event_class, **kwargs)

    def add_credits(self, amount: int, reference: str = "", *, actor: str = "", reason: str = "") -> int:
        """Top up the balance; returns the balance after."""
        self._check_positive(amount, "a top-up")
        AMOUNT.check(amount)
        if amount > MAX_BALANCE - self.balance:
            raise InvalidAmount(f"a top-up of {amount} micro-credits would take team {self.name!r}'s balance past "
                                f"the most a ledger can hold ({MAX_BALANCE} micro-credits)")
        self.trigger_event(
            self.CreditsAdded, amount=amount, reference=reference, balance_after=self.balance + amount, actor=actor,
            reason=reason)
        return self.balance

    # Every operator's command takes who gives it (``actor``) and why (``reason``), kept on its event.

    def issue_key(self, key_id: str, key_hash: str, label: str = "", *, actor: str = "", reason: str = "") -> None:
        if key_id in self.keys:
            raise LedgerError(f"key id {key_id!r} is already issued")
        self.trigger_event(self.KeyIssued, key_id=key_id, key_hash=key_hash, label=label, actor=actor, reason=reason)

    def revoke_key(self, key_id: str, *, actor: str = "", reason: str = "") -> None:
        if self._key(key_id)["revoked"]:
            raise LedgerError(f"key {key_id!r} of team {self.name!r} is already revoked")
        self.trigger_event(self.KeyRevoked, key_id=key_id, actor=actor, reason=reason)

    def restrict_key(self, key_id: str, models: list[str], *, actor: str = "", reason: str = "") -> None:
        self._key(key_id)
        self.trigger_event(self.KeyModelsRestricted, key_id=key_id, models=sorted(set(models)), actor=actor,
                           reason=reason)

    def restrict_key_endpoints(self, key_id: str, endpoints: list[str], *, actor: str = "", reason: str = "") -> None:
        self._key(key_id)
        self.trigger_event(self.KeyEndpointsRestricted, key_id=key_id, endpoints=sorted(set(endpoints)), actor=actor,
                           reason=reason)

    def limit_key(self, key_id: str, rpm: int | None, tpm: int | None, *, actor: str = "", reason: str = "") -> None:
        self._key(key_id)
        self.trigger_event(self.KeyLimitsSet, key_id=key_id, rpm=_limit(rpm, RPM), tpm=_limit(tpm, TPM),
                           actor=actor, reason=reason)

    def limit(self, rpm: int | None, tpm: int | None, *, actor: str = "", reason: str = "") -> None:
        self.trigger_event(self.TeamLimitsSet, rpm=_limit(rpm, RPM), tpm=_limit(tpm, TPM), actor=actor,
                           reason=reason)

    def suspend(self, reason: str = "", *, actor: str = "") -> None:
        if self.suspended:
            raise LedgerError(f"team {self.name!r} is already suspended")
        self.trigger_event(self.Suspended, reason=reason, actor=actor)

    def reinstate(self, *, actor: str = "", reason: str = "") -> None:
        if not self.suspended:
            raise LedgerError(f"team {self.name!r} is not suspended")
        self.trigger_event(self.Reinstated, actor=actor, reason=reason)

    def place_hold(self, request_id: str, amount: int, key_id: str, model: str, endpoint: str,
                   *, owner: str = "", idem_key: str = "") -> int:
        """Reserve ``amount`` for a request about to go upstream, on behalf of gateway process
        ``owner``; returns what is still available.

        Placing the same request's hold again is a no-op, so a command replayed after a write
        conflict never reserves twice. A request under an Idempotency-Key (``idem_key``) another
        request of the team still holds is refused (``RequestInProgress``): a client retrying while
        its first attempt runs.
        """
        if request_id in self.holds:
            return self.available
        if self.suspended:
            raise TeamSuspended(self.name)
        if idem_key and idem_key in self.idem_holds:
            raise RequestInProgress(self.name, self.idem_holds[idem_key])
        if amount < 0:
            raise InvalidAmount(f"a hold cannot be negative: {amount}")
        self._check_budgets(amount, key_id, self.now())
        if amount > self.available:
            raise InsufficientCredits(self.name, amount, self.available)
        self.trigger_event(self.HoldPlaced, request_id=request_id, amount=amount, key_id=key_id, model=model,
                           endpoint=endpoint, owner=owner, idem_key=idem_key)
        return self.available

    def charge(self, request_id: str, usage: TokenUsage, price: Price | PriceSource, credits_per_usd: Decimal, *,
               key_id: str, model: str, endpoint: str, lease: str = "") -> TeamLedger.Charged:
        """Debit what ``usage`` cost and close the request's hold; returns the recorded event."""
        return self.charge_priced(request_id, usage, price, credits_per_usd, key_id=key_id, model=model,
                                  endpoint=endpoint, lease=lease)[0]

    def charge_priced(
        self,
        request_id: str,
        usage: TokenUsage,
        price: Price | PriceSource,
        credits_per_usd: Decimal,
        *,
        key_id: str,
        model: str,
        endpoint: str,
        lease: str = "",
        tags: Mapping[str, str] | None = None,
        end_user: str = "",
    ) -> tuple[TeamLedger.Charged, Cost]:
        """Debit what ``usage`` cost and close the request's hold; returns the recorded event and
        what its cost is made of (its parts, computed once, for the answer's receipt).

        ``price`` is the price list (or a copy of it): the charge is priced by the entry in force at
        the instant the event records, which it names (``price_ref``); or a bare price, which names
        none (tools and tests). The team's price adjustment is applied on top.

        A request whose hold expired (its process looked dead) is still charged when it does finish,
        as far as the available balance goes: it was served. A request held against a ``lease``
        is charged from what is left of the lease, then from the available balance.
        """
        at = self.now()
        if isinstance(price, Price):
            table, price_ref = price, ""
        else:
            entry = price.in_force(model, at)
            if entry is None:
                raise LedgerError(f"model {model!r} has no price in force at {at.isoformat()}")
            table, price_ref = entry.price, entry.ref
        adjustment = self.adjustment_for(model)
        priced = price_usage(usage, table, credits_per_usd, Decimal(adjustment or 0))
        cost = priced.micros
        # Beyond its hold, a charge takes no more than is available, nor than its budgets have left.
        tightest = self.budget_left(key_id, at)
        room = self.available if tightest is None else min(self.available, max(0, tightest[0]))
        if lease:
            if request_id in self.lease_charges:
                raise AlreadyCharged(self.name, request_id)
            left = self.holds.get(lease, 0)
            charged = min(cost, left + room)
            hold = min(charged, left)
        else:
            hold = 0 if request_id in self.expired and request_id not in self.holds else self._open_hold(request_id)
            charged = min(cost, hold + room)
        self.trigger_event(
            self.Charged,
            timestamp=at,
            request_id=request_id,
            key_id=key_id,
            model=model,
            endpoint=endpoint,
            usage=usage.as_record(),
            price=priced.applied.as_record(),
            credits_per_usd=str(credits_per_usd),
            cost=cost,
            charged=charged,
            uncollected=cost - charged,
            hold=hold,
            balance_after=self.balance - charged,
            lease=lease,
            basis=priced.basis,
            price_ref=price_ref,
            adjustment=adjustment,
            tags=dict(tags or {}),
            end_user=end_user,
            key_budget_left=self._key_budget_left(key_id, at, charged, 0 if lease else hold),
        )
        event = cast(TeamLedger.Charged, self.pending_events[-1])  # the event just triggered
        if self.alert_thresholds and charged:
            self._raise_alerts(charged, self.balance + charged, at, key_id, request_id)
        return event, priced

    def set_budget(self, limit: int | None, period: str, key_id: str = "", *, actor: str = "",
                   reason: str = "") -> None:
        """Let the key ``key_id`` (no key: the whole team) spend at most ``limit`` micro-credits per
        ``period``; a ``limit`` of None lifts its budget."""
        if key_id:
            self._key(key_id)
        if period not in PERIODS:
            raise LedgerError(f"a budget's period is one of {', '.join(PERIODS)}, not {period!r}")
        if limit is not None:
            BUDGET.check(limit)
        self.trigger_event(self.BudgetSet, key_id=key_id, limit=limit, period=period, actor=actor, reason=reason)

    def budget_of(self, key_id: str = "") -> Budget | None:
        """The key's budget (no key: the team's), if it has one."""
        return Budget.from_record(self._key(key_id).get("budget") if key_id else self.budget)

    def budget_left(self, key_id: str, at: datetime) -> tuple[int, Budget, str] | None:
        """The tightest budget a request of ``key_id`` (``""``: none, a lease) is held against at
        ``at``: what it has left (its limit, less what was spent this period, less what is held
        against it; negative if a lowered limit is overspent), the budget, and whose it is (a key
        id, or ``""`` for the team's). None if neither the key nor the team has a budget."""
        tightest: tuple[int, Budget, str] | None = None
        scopes = [(key_id, self.key_held.get(key_id, 0))] if key_id in self.keys else []
        for scope, held in (*scopes, ("", self.held)):
            budget = self.budget_of(scope)
            if budget is None:
                continue
            left = budget.limit - spent_in(self.spend.get(scope), budget.period, at) - held
            if tightest is None or left < tightest[0]:
                tightest = (left, budget, scope)
        return tightest

    def _check_budgets(self, amount: int, key_id: str, at: datetime) -> None:
        """Refuse a hold of ``amount`` its budgets cannot cover, when they are tighter than the
        available balance (which the caller checks next)."""
        tightest = self.budget_left(key_id, at)
        if tightest is None:
            return
        left, budget, scope = tightest
        if amount > left and left < self.available:
            resets = budget.resets_at(at)
            raise BudgetExceeded(self.name, amount, max(0, left), key_id=scope, limit=budget.limit,
                                 period=budget.period, resets_at=resets.isoformat() if resets else "")

    def _key_budget_left(self, key_id: str, at: datetime, charged: int, hold: int) -> int | None:
        """What the key's budget will have left once ``charged`` is debited and its ``hold`` closed."""
        budget = self.budget_of(key_id) if key_id in self.keys else None
        if budget is None:
            return None
        spent = spent_in(self.spend.get(key_id), budget.period, at) + charged
        held = self.key_held.get(key_id, 0) - hold
        return max(0, budget.limit - spent - held)

    def adjustment_for(self, model: str) -> str:
        """The team's price adjustment for ``model``, in percent (``""``: none)."""
        return self.price_adjustments.get(model) or self.price_adjustments.get("", "")

    def adjust_credits(self, amount: int, reason: str, reference: str = "", *, actor: str = "") -> int:
        """Give credits back (``amount`` > 0) or take them (< 0) as a correction; returns the balance
        after. A correction takes no more than is available (held credits belong to requests)."""
        if not isinstance(amount, int) or isinstance(amount, bool) or amount == 0:
            raise InvalidAmount(f"an adjustment must be a non-zero number of micro-credits, got {amount!r}")
        AMOUNT.check(abs(amount))
        if not reason.strip():
            raise LedgerError("an adjustment must say why (a reason)")
        if amount > MAX_BALANCE - self.balance:
            raise InvalidAmount(f"an adjustment of {amount} micro-credits would take team {self.name!r}'s balance "
                                f"past the most a ledger can hold")
        if -amount > self.available:
            raise InvalidAmount(f"team {self.name!r} has {format_credits(self.available)} credits available: an "
                                f"adjustment cannot take {format_credits(-amount)} (what requests hold is theirs)")
        if reference and reference in self.adjustment_references:
            raise LedgerError(f"team {self.name!r} already has an adjustment under the reference {reference!r}")
        self.trigger_event(self.CreditsAdjusted, amount=amount, reason=reason, reference=reference,
                           balance_after=self.balance + amount, actor=actor)
        if self.alert_thresholds and amount < 0:
            self._raise_alerts(0, self.balance - amount, self.now(), "", "")
        return self.balance

    def apply_rerate(self, scope: rerates.RerateScope, lines: Sequence[tuple[str, str, int]], *,
                     through_version: int | None, actor: str = "", reason: str = "") -> list[int]:
        """Record the re-rate ``scope`` and its adjustments ``(model, key id, amount)`` (a refund > 0, a
        debit < 0), refunds first, a debit taking no more than is available; returns what each moved,
        in the order given. Refused (``RerateRefused``) if its period has not ended or overlaps an
        applied re-rate of the same models; ``RerateRaced`` if ``through_version`` (the version the
        re-rate was computed through, when nothing after its period was seen yet) is not the team's."""
        if through_version is not None and through_version != self.version:
            raise rerates.RerateRaced(f"team {self.name!r} recorded events while the re-rate was computed; "
                                      "run it again")
        problem = rerates.refusal(self.rerates, scope, self.name, self.now())
        if problem is not None:
            raise rerates.RerateRefused(problem)
        moved = dict.fromkeys(range(len(lines)), 0)
        if not any(amount for _, _, amount in lines):
            return list(moved.values())
        self.trigger_event(self.Rerated, reference=scope.reference, start=scope.start.isoformat(),
                           end=scope.end.isoformat(), models=list(scope.models), prices=scope.prices, actor=actor,
                           reason=reason)
        for i in sorted(moved, key=lambda i: -lines[i][2]):  # refunds first: a debit may take from them
            model, key_id, amount = lines[i]
            moved[i] = max(amount, -self.available)
            if moved[i]:
                why = f"re-rated {scope.start.isoformat()} to {scope.end.isoformat()} ({model}, {key_id})"
                self.adjust_credits(moved[i], f"{why}: {reason}" if reason else why,
                                    f"{scope.reference}:{model}:{key_id}", actor=actor)
        return list(moved.values())

    def set_alert(self, kind: str, value: Decimal, key_id: str = "", *, enabled: bool = True, actor: str = "",
                  reason: str = "") -> None:
        """Alert when the key's (no key: the team's) budget reaches ``value`` percent
        (``budget_percent``), or the team's balance falls under ``value`` micro-credits
        (``balance_below``); ``enabled`` False removes the alert."""
        if key_id:
            self._key(key_id)
        try:
            recorded = check_threshold(kind, value, key_id)
        except ValueError as exc:
            raise LedgerError(str(exc)) from None
        self.trigger_event(self.AlertThresholdSet, key_id=key_id, kind=kind, value=recorded, enabled=enabled,
                           actor=actor, reason=reason)

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
        self.trigger_event(self.AlertRaised, alert_id=alert_id(self.id, self.version + 1), key_id=t.key_id,
                           kind=t.kind, threshold=t.value, value=value, limit=limit, period=period,
                           request_id=request_id)

    def adjust_prices(self, percent: Decimal, model: str = "", reason: str = "", *, actor: str = "") -> None:
        """Price the team's requests ``percent`` above (negative: below) the price list, for ``model``
        or, with no model, for every model without an adjustment of its own (0 ends it)."""
        PRICE_ADJUSTMENT_PERCENT.check(percent)
        self.trigger_event(self.PricesAdjusted, model=model, percent=f"{percent.normalize():f}", reason=reason,
                           actor=actor)

    def clamp_outputs(self, enabled: bool, key_id: str = "", *, actor: str = "", reason: str = "") -> None:
        """Lower a request's output limit to what the balance covers instead of refusing it, for the
        key ``key_id`` or (no key) for the whole team."""
        if key_id:
            self._key(key_id)
        self.trigger_event(self.OutputClampSet, key_id=key_id, enabled=enabled, actor=actor, reason=reason)

    def clamps_output(self, key_id: str) -> bool:
        """Whether requests of the key get what the balance covers instead of 402."""
        own = self.keys.get(key_id, {}).get("clamp")
        return bool(own) if own is not None else self.clamp_output

    def lease_credits(self, lease: str, needed: int, wanted: int, owner: str = "") -> int:
        """Add to a process's lease at least ``needed`` and up to ``wanted`` of the available balance
        (the part beyond ``needed`` at most a quarter of what else is available); returns what the
        lease holds now. ``InsufficientCredits`` if not even ``needed`` is there."""
        if self.suspended:
            raise TeamSuspended(self.name)
        self._check_positive(needed, "a lease")
        at = self.now()
        self._check_budgets(needed, "", at)  # a team's budget bounds its leases as it does its holds
        tightest = self.budget_left("", at)
        available = self.available if tightest is None else min(self.available, max(0, tightest[0]))
        if needed > available:
            raise InsufficientCredits(self.name, needed, available)
        # Beyond what is needed, a lease takes at most a quarter of what is available, so the
        # team's other gateway processes can still lease theirs.
        extra = min(wanted - needed, (available - needed) // LEASE_SHARE) if wanted > needed else 0
        self.trigger_event(self.CreditsLeased, lease=lease, amount=needed + max(0, extra), owner=owner)
        return self.holds[lease]

    def return_lease(self, lease: str) -> None:
        """Give what is left of a lease back to the available balance (no-op if nothing is left)."""
        if self.holds.get(lease, 0) > 0:
            self.release_hold(lease, "lease returned")
        elif lease in self.holds:
            self.trigger_event(self.HoldReleased, request_id=lease, amount=0, reason="lease returned")

    def record_failure(self, request_id: str, lease: str, key_id: str, model: str, endpoint: str, reason: str) -> None:
        self.trigger_event(self.RequestFailed, request_id=request_id, lease=lease, key_id=key_id, model=model,
                           endpoint=endpoint, reason=reason)

    def release_expired(self, now: float, timeout: float) -> list[str]:
        """Release the holds placed more than ``timeout`` seconds before ``now``: their requests'
        processes died, or their streams outlived any sane bound. Returns their request ids."""
        stale = [rid for rid, placed in self.hold_times.items() if placed + timeout < now]
        for request_id in stale:
            self.trigger_event(self.HoldReleased, request_id=request_id, amount=self.holds[request_id], reason=EXPIRED)
        return stale

    def release_abandoned(
        self,
        owners: Collection[str],
        delivered: Sequence[Delivery] = (),
        prices: Mapping[str, Price] | PriceSource | None = None,
        credits_per_usd: Decimal = Decimal(0),
    ) -> list[str]:
        """The gateway processes ``owners`` stopped answering: charge what their streams had
        ``delivered`` as they last reported it (at ``prices``, by model), then release every hold and
        lease they still have. Returns the ids released. A stream already charged, or whose hold is
        gone, is left alone; one charged later by its process after all is refused by the store's
        once-only charge."""
        dead = set(owners)
        for d in delivered:
            price = _price_of(prices, d.model)
            held_by = d.lease or d.request_id
            if (price is None or not d.usage.total_tokens or held_by not in self.holds
                    or self.hold_owners.get(held_by) not in dead or d.request_id in self.lease_charges):
                continue
            self.charge_priced(d.request_id, d.usage, price, credits_per_usd, key_id=d.key_id, model=d.model,
                               endpoint=d.endpoint, lease=d.lease, tags=d.tags, end_user=d.end_user)
        released = [held for held, owner in self.hold_owners.items() if owner in dead and held in self.holds]
        for held in released:
            self.trigger_event(self.HoldReleased, request_id=held, amount=self.holds[held], reason=ABANDONED)
        return released

    def release_hold(self, request_id: str, reason: str) -> int:
        """Close a request's hold without charging (nothing was delivered); returns available."""
        hold = self._open_hold(request_id)
        self.trigger_event(self.HoldReleased, request_id=request_id, amount=hold, reason=reason)
        return self.available

    def _forget_hold(self, request_id: str, amount: int) -> None:
        """A hold of ``amount`` was closed (charged or released): forget what was kept beside it."""
        self.hold_times.pop(request_id, None)
        self.hold_owners.pop(request_id, None)
        key_id = self.hold_keys.pop(request_id, None)
        if key_id is not None:
            if (still := self.key_held.get(key_id, 0) - amount) > 0:
                self.key_held[key_id] = still
            else:
                self.key_held.pop(key_id, None)
        if self.idem_holds:
            for idem_key, holder in list(self.idem_holds.items()):
                if holder == request_id:
                    del self.idem_holds[idem_key]

    # -- guards -----------------------------------------------------------------------------

    def _key(self, key_id: str) -> dict[str, Any]:
        try:
            return self.keys[key_id]
        except KeyError:
            raise KeyNotFound(self.name, key_id) from None

    def _open_hold(self, request_id: str) -> int:
        try:
            return self.holds[request_id]
        except KeyError:
            raise HoldNotFound(self.name, request_id) from None

    @staticmethod
    def _check_positive(amount: int, what: str) -> None:
        if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
            raise InvalidAmount(f"{what} must be a positive number of micro-credits, got {amount!r}")
