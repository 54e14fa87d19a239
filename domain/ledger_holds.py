"""The request path's commands: a hold placed before a request goes upstream, its charge when it is
served (or the release of its hold when nothing was), the credit leases a gateway process holds its
requests against in memory, and the release of the holds of requests whose process died.

Part of the team aggregate (``TeamLedger`` in ``domain/ledger.py`` is these commands, the operators'
and the state). Each checks its guards, then records its event (``domain/ledger_events.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from domain import credit_lots
from domain import ledger_events as events
from domain.attribution import Attribution
from domain.ledger_errors import (
    AlreadyCharged,
    BudgetExceeded,
    HoldNotFound,
    InsufficientCredits,
    InvalidAmount,
    LedgerError,
    RefusingBudget,
    RequestInProgress,
    TeamSuspended,
)
from domain.ledger_policies import TeamPolicies
from domain.ledger_state import ABANDONED, EXPIRED, Hold, check_positive
from domain.prices import PriceEntry, PriceSource
from domain.pricing import Cost, Price, price_usage
from domain.pricing import batch_basis as batch_line_basis
from domain.usage import TokenUsage

LEASE_SHARE = 4  # a lease grows by at most 1/LEASE_SHARE of the available balance beyond what is needed


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
    #: The price key of the deployment that served it (``MODEL/NAME``; "": the model's price).
    price_key: str = ""


def _price_of(prices: Mapping[str, Price] | PriceSource | None, key: str) -> Price | PriceSource | None:
    """What prices the charges under price key ``key`` (a model's id, or ``MODEL/NAME`` for one of
    its deployments): its price in a mapping, or the price list read under that key if it has one."""
    if prices is None:
        return None
    if isinstance(prices, Mapping):
        return prices.get(key)
    return _PricesUnder(prices, key) if prices.in_force(key, datetime.now(UTC)) is not None else None


@dataclass(frozen=True, slots=True)
class _PricesUnder:
    """A price list read under one key, whatever model a charge names: a deployment's own price
    (``MODEL/NAME``), which the charge's ``price_ref`` then names."""

    prices: PriceSource
    key: str

    def in_force(self, model: str, at: datetime) -> PriceEntry | None:
        return self.prices.in_force(self.key, at)


@dataclass(frozen=True, slots=True)
class BatchLine:
    """One line of a batch's output, as its charge needs it: the line's ``custom_id``, the model it
    was served by (the client's name for it) and what the upstream says it used."""

    custom_id: str
    model: str
    usage: TokenUsage

    def request_id(self, batch_id: str) -> str:
        """The line's request id: its batch's and its own custom id (unique within the batch)."""
        return f"{batch_id}:{self.custom_id}"


@dataclass(frozen=True, slots=True)
class RequestOnLedger:
    """A request as its team's ledger records it: its id, the key it came with, its model and
    endpoint, and who it is attributed to (its tags and end user, recorded with its charge)."""

    request_id: str
    key_id: str
    model: str
    endpoint: str
    attribution: Attribution = field(default_factory=Attribution)


class TeamHolds(TeamPolicies):
    """The request path's commands of the team aggregate (a part of ``TeamLedger``, never used alone)."""

    if TYPE_CHECKING:
        pending_events: list[Any]

        def now(self) -> datetime:
            """The aggregate's (``TeamLedger.now``): the instant the team judges and records at."""

        def _raise_alerts(self, charged: int, balance_before: int, at: datetime, key_id: str, request_id: str) -> None:
            """The aggregate's: an alert for each threshold the money just moved crossed."""

        def begin_recharge_if_due(self) -> None:
            """The aggregate's: begin an auto-recharge attempt if one is due."""

        def expire_lots(self, at: datetime) -> None:
            """The aggregate's: write off the credit lots expired by ``at``."""

    def place_hold(
        self,
        request: RequestOnLedger,
        amount: int,
        *,
        owner: str = "",
        idem_key: str = "",
        batch: bool = False,
        settles_within: float = credit_lots.SETTLES_WITHIN,
    ) -> int:
        """Reserve ``amount`` for a request about to go upstream, on behalf of gateway process
        ``owner``; returns what is still available.

        Placing the same request's hold again is a no-op, so a command replayed after a write
        conflict never reserves twice. A request under an Idempotency-Key (``idem_key``) another
        request of the team still holds is refused (``RequestInProgress``): a client retrying while
        its first attempt runs. The hold counts on no credit that expires within ``settles_within``
        seconds (the gateway's ``hold_timeout``; a batch's, a day and two hours), when it could
        still be settling.
        """
        request_id, key_id = request.request_id, request.key_id
        if request_id in self.holds:
            return self.available
        if self.suspended:
            raise TeamSuspended(self.name)
        if idem_key and idem_key in self.idem_holds:
            raise RequestInProgress(self.name, self.idem_holds[idem_key])
        if amount < 0:
            raise InvalidAmount(f"a hold cannot be negative: {amount}")
        at = self.now()
        self.expire_lots(at)
        self._check_budgets(amount, key_id, at)
        window = credit_lots.BATCH_SETTLES_WITHIN if batch else settles_within
        room = self.hold_room(at.timestamp() + window)
        if amount > room:
            raise InsufficientCredits(self.name, amount, max(0, room))
        self.trigger_event(
            events.HoldPlaced,
            request_id=request_id,
            amount=amount,
            key_id=key_id,
            model=request.model,
            endpoint=request.endpoint,
            owner=owner,
            idem_key=idem_key,
            batch=batch,
        )
        return self.available

    def submit_batch(self, batch: RequestOnLedger, amount: int, *, idem_key: str = "") -> int:
        """Hold ``amount`` (every line's worst case at the batch price) for the batch ``batch`` (its
        request id the batch's id) until it settles; returns what is still available. Refused as any
        hold is (suspension, budgets, the available balance)."""
        return self.place_hold(batch, amount, idem_key=idem_key, batch=True)

    def charge_batch_line(
        self, batch: RequestOnLedger, line: BatchLine, price: Price | PriceSource, credits_per_usd: Decimal
    ) -> tuple[events.Charged, Cost]:
        """Charge one line of the batch ``batch`` from its own usage at the model's batch price,
        against the batch's hold (then the available balance). The line's request id is
        ``BATCH_ID:CUSTOM_ID``: a line is charged once (``AlreadyCharged``, and the store's once-only
        index, refuse a second)."""
        if not self._is_batch_hold(batch.request_id) and batch.request_id not in self.expired:
            raise HoldNotFound(self.name, batch.request_id)
        request = RequestOnLedger(
            line.request_id(batch.request_id), batch.key_id, line.model, batch.endpoint, batch.attribution
        )
        return self.charge_priced(request, line.usage, price, credits_per_usd, lease=batch.request_id, line=line)

    def settle_batch(self, batch_id: str, status: str) -> int:
        """The batch ended (``completed``, ``cancelled``, ``expired``, ``failed``) and its lines are
        charged: release what its hold still holds. Returns what was released (0 if already settled)."""
        if not self._is_batch_hold(batch_id):
            return 0
        amount = self.holds[batch_id].amount
        self.trigger_event(events.HoldReleased, request_id=batch_id, amount=amount, reason=f"batch {status}")
        return amount

    def _is_batch_hold(self, batch_id: str) -> bool:
        hold = self.holds.get(batch_id)
        return hold is not None and hold.batch

    def charge(
        self,
        request: RequestOnLedger,
        usage: TokenUsage,
        price: Price | PriceSource,
        credits_per_usd: Decimal,
        *,
        lease: str = "",
    ) -> events.Charged:
        """Debit what ``usage`` cost and close the request's hold; returns the recorded event."""
        return self.charge_priced(request, usage, price, credits_per_usd, lease=lease)[0]

    def charge_priced(
        self,
        request: RequestOnLedger,
        usage: TokenUsage,
        price: Price | PriceSource,
        credits_per_usd: Decimal,
        *,
        lease: str = "",
        line: BatchLine | None = None,
    ) -> tuple[events.Charged, Cost]:
        """Debit what ``usage`` cost and close the request's hold; returns the recorded event and
        what its cost is made of (its parts, computed once, for the answer's receipt).

        ``price`` is the price list (or a copy of it): the charge is priced by the entry in force at
        the instant the event records, which it names (``price_ref``); or a bare price, which names
        none (tools and tests). The team's price adjustment is applied on top.

        A request whose hold expired (its process looked dead) is still charged when it does finish,
        as far as the available balance goes: it was served. A request held against a ``lease``
        is charged from what is left of the lease, then from the available balance.
        """
        request_id, key_id, model = request.request_id, request.key_id, request.model
        at = self.now()
        self.expire_lots(at)
        if isinstance(price, Price):
            table, price_ref = price, ""
        else:
            entry = price.in_force(model, at)
            if entry is None:
                raise LedgerError(f"model {model!r} has no price in force at {at.isoformat()}")
            table, price_ref = entry.price, entry.ref
        batch_basis = ""
        if line is not None:  # a batch line: the model's batch price
            table, batch_basis = table.for_batch()
        adjustment = self.adjustment_for(model)
        priced = price_usage(usage, table, credits_per_usd, Decimal(adjustment or 0))
        basis = batch_line_basis(batch_basis, priced.basis) if batch_basis else priced.basis
        cost = priced.micros
        # Beyond its hold, a charge takes no more than is available, nor than its budgets have left.
        tightest = self.budget_left(key_id, at)
        room = self.available if tightest is None else min(self.available, max(0, tightest[0]))
        if lease:
            if request_id in self.lease_charges:
                raise AlreadyCharged(self.name, request_id)
            left = self.held_for(lease)
            charged = min(cost, left + room)
            hold = min(charged, left)
        else:
            hold = (
                0 if request_id in self.expired and request_id not in self.holds else self._open_hold(request_id).amount
            )
            charged = min(cost, hold + room)
        self.trigger_event(
            events.Charged,
            timestamp=at,
            request_id=request_id,
            key_id=key_id,
            model=model,
            endpoint=request.endpoint,
            usage=usage.as_record(),
            price=priced.applied.as_record(),
            credits_per_usd=str(credits_per_usd),
            cost=cost,
            charged=charged,
            uncollected=cost - charged,
            hold=hold,
            balance_after=self.balance - charged,
            lease=lease,
            basis=basis,
            price_ref=price_ref,
            adjustment=adjustment,
            tags=dict(request.attribution.tags),
            end_user=request.attribution.end_user,
            key_budget_left=self.key_budget_left(key_id, at, charged, 0 if lease and line is None else hold),
            batch_id=lease if line is not None else "",
            custom_id=line.custom_id if line is not None else "",
            drawn=credit_lots.draw(self.lots, charged) if charged else None,
        )
        event = cast(events.Charged, self.pending_events[-1])  # the event just triggered
        if self.alert_thresholds and charged:
            self._raise_alerts(charged, self.balance + charged, at, key_id, request_id)
        if self.recharge is not None:
            self.begin_recharge_if_due()
        return event, priced

    def _check_budgets(self, amount: int, key_id: str, at: datetime) -> None:
        """Refuse a hold of ``amount`` its budgets cannot cover, when they are tighter than the
        available balance (which the caller checks next)."""
        tightest = self.budget_left(key_id, at)
        if tightest is None:
            return
        left, budget, scope = tightest
        if amount > left and left < self.available:
            resets = budget.resets_at(at)
            raise BudgetExceeded(
                self.name,
                amount,
                max(0, left),
                RefusingBudget(scope, budget.limit, budget.period, resets.isoformat() if resets else ""),
            )

    def lease_credits(
        self, lease: str, needed: int, wanted: int, owner: str = "", settles_within: float = credit_lots.SETTLES_WITHIN
    ) -> int:
        """Add to a process's lease at least ``needed`` and up to ``wanted`` of the available balance
        (the part beyond ``needed`` at most a quarter of what else is available); returns what the
        lease holds now. ``InsufficientCredits`` if not even ``needed`` is there."""
        if self.suspended:
            raise TeamSuspended(self.name)
        check_positive(needed, "a lease")
        at = self.now()
        self.expire_lots(at)
        self._check_budgets(needed, "", at)  # a team's budget bounds its leases as it does its holds
        tightest = self.budget_left("", at)
        room = max(0, self.hold_room(at.timestamp() + settles_within))
        available = room if tightest is None else min(room, max(0, tightest[0]))
        if needed > available:
            raise InsufficientCredits(self.name, needed, available)
        # Beyond what is needed, a lease takes at most a quarter of what is available, so the
        # team's other gateway processes can still lease theirs.
        extra = min(wanted - needed, (available - needed) // LEASE_SHARE) if wanted > needed else 0
        self.trigger_event(events.CreditsLeased, lease=lease, amount=needed + max(0, extra), owner=owner)
        if self.recharge is not None:
            self.begin_recharge_if_due()
        return self.holds[lease].amount

    def return_lease(self, lease: str) -> None:
        """Give what is left of a lease back to the available balance (no-op if nothing is left)."""
        if self.held_for(lease) > 0:
            self.release_hold(lease, "lease returned")
        elif lease in self.holds:
            self.trigger_event(events.HoldReleased, request_id=lease, amount=0, reason="lease returned")

    def record_failure(self, request_id: str, lease: str, key_id: str, model: str, endpoint: str, reason: str) -> None:
        self.trigger_event(
            events.RequestFailed,
            request_id=request_id,
            lease=lease,
            key_id=key_id,
            model=model,
            endpoint=endpoint,
            reason=reason,
        )

    def release_expired(self, now: float, timeout: float) -> list[str]:
        """Release the holds placed more than ``timeout`` seconds before ``now``: their requests'
        processes died, or their streams outlived any sane bound. Returns their request ids."""
        stale = [
            request_id for request_id, hold in self.holds.items() if hold.placed + timeout < now and not hold.batch
        ]
        for request_id in stale:
            self.trigger_event(
                events.HoldReleased, request_id=request_id, amount=self.holds[request_id].amount, reason=EXPIRED
            )
        return stale

    def release_abandoned(
        self,
        owners: Collection[str],
        delivered: Sequence[Delivery] = (),
        prices: Mapping[str, Price] | PriceSource | None = None,
        credits_per_usd: Decimal = Decimal(0),
    ) -> list[str]:
        """The gateway processes ``owners`` stopped answering: charge what their streams had
        ``delivered`` as they last reported it (at ``prices``: the serving deployment's price, or
        the model's if that has none in force), then release every hold and
        lease they still have. Returns the ids released. A stream already charged, or whose hold is
        gone, is left alone; one charged later by its process after all is refused by the store's
        once-only charge."""
        dead = set(owners)
        for d in delivered:
            price = (d.price_key and _price_of(prices, d.price_key)) or _price_of(prices, d.model)
            held_by = d.lease or d.request_id
            hold = self.holds.get(held_by)
            if (
                price is None
                or not d.usage.total_tokens
                or hold is None
                or not hold.owner
                or hold.owner not in dead
                or d.request_id in self.lease_charges
            ):
                continue
            request = RequestOnLedger(d.request_id, d.key_id, d.model, d.endpoint, Attribution(d.tags, d.end_user))
            self.charge_priced(request, d.usage, price, credits_per_usd, lease=d.lease)
        released = [held for held, hold in self.holds.items() if hold.owner and hold.owner in dead]
        for held in released:
            self.trigger_event(events.HoldReleased, request_id=held, amount=self.holds[held].amount, reason=ABANDONED)
        return released

    def release_hold(self, request_id: str, reason: str) -> int:
        """Close a request's hold without charging (nothing was delivered); returns available."""
        hold = self._open_hold(request_id)
        self.trigger_event(events.HoldReleased, request_id=request_id, amount=hold.amount, reason=reason)
        return self.available

    # -- guards -----------------------------------------------------------------------------

    def _open_hold(self, request_id: str) -> Hold:
        try:
            return self.holds[request_id]
        except KeyError:
            raise HoldNotFound(self.name, request_id) from None
