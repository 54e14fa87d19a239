"""A team ledger's state: what its events make of the team, as typed records.

The team aggregate (``domain/ledger.py``) is this state plus the commands that record events; the
events (``domain/ledger_events.py``) move it. Each open hold is one :class:`Hold` record and each key
one :class:`KeyPolicy`, replaced whole when an event changes it, never edited: so a copy of the team
(``TeamLedger.fork``) shares every record with the original and copies only the dictionaries.

The state is also what a snapshot stores (``projections/snapshots.py``, which registers how the
records are encoded); :data:`STATE_VERSION` is its version, and a snapshot of an older state is
upcast when read (``domain/ledger_upcasts.py``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from domain.auto_recharge import Recharge
from domain.budgets import Budget, spent_in
from domain.credit_lot import Lot
from domain.credit_lots import spendable
from domain.ledger_errors import InvalidAmount, KeyNotFound

#: The state's version (the aggregate's ``class_version``): a snapshot of an older one is upcast.
STATE_VERSION = 7
#: Why a hold whose request's process looked dead was released (``release_expired``).
EXPIRED = "expired"
#: The release of a hold whose gateway process stopped answering (``release_abandoned``).
ABANDONED = "abandoned"
#: How many released or lease-charged request ids a team remembers (its state stays bounded).
MAX_REMEMBERED_EXPIRIES = 1000


def check_positive(amount: int, what: str) -> None:
    """Refuse (``InvalidAmount``) an ``amount`` of ``what`` that is not a positive whole number."""
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        raise InvalidAmount(f"{what} must be a positive number of micro-credits, got {amount!r}")


class Hold(msgspec.Struct, frozen=True, gc=False):
    """Credits set aside and not yet settled: a request's hold, or a gateway process's credit lease
    (its requests in flight are then held against it, in that process's memory)."""

    amount: int
    #: Unix time it was placed (a lease: last grown or used): what its expiry is judged by.
    placed: float
    #: The key it was placed for, which its amount counts against (None: a lease, or a hold that was
    #: open when budgets came, counted against no key).
    key_id: str | None = None
    #: The gateway process holding it (its instance id; ``""``: not said): if that process stops
    #: answering, any other releases the hold.
    owner: str = ""
    #: The client's Idempotency-Key it was placed under (``""``: none).
    idem_key: str = ""
    #: A batch's hold (its id the batch's): it lasts until the batch settles, hours if need be, so it
    #: is never released as expired; its lines are charged against it as against a lease.
    batch: bool = False


class KeyPolicy(msgspec.Struct, frozen=True, gc=False):
    """What one of the team's keys may do (its secret is only ever kept hashed)."""

    key_hash: str
    label: str
    revoked: bool = False
    models: tuple[str, ...] = ()  # the models it may use (empty: any)
    endpoints: tuple[str, ...] = ()  # the endpoints it may call (empty: any)
    rpm: int | None = None  # its own rate limits per minute (None: no limit of that kind)
    tpm: int | None = None
    clamp: bool | None = None  # its own output clamp (None: the team's)
    budget: Budget | None = None  # its own budget (``domain/budgets.py``)


class Payment(msgspec.Struct, frozen=True, gc=False):
    """A payment the team's credit came from (its provider's id is the key it is kept under): the lot
    it became, what it credited, and what refunds and disputes took back of it since."""

    lot: str
    amount: int
    refunded: int = 0
    disputed: int = 0
    #: The refunds and disputes recorded against it, by the provider's id: none is recorded twice.
    reversals: tuple[str, ...] = ()


class LedgerState:
    """The state of a team's ledger, and what can be read from it without recording anything."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.balance = 0
        self.held = 0
        self.holds: dict[str, Hold] = {}  # request or lease id → its open hold
        self.idem_holds: dict[str, str] = {}  # Idempotency-Key → the request holding it now
        self.expired: dict[str, int] = {}  # holds released as expired, whose request may yet be charged
        self.keys: dict[str, KeyPolicy] = {}
        self.lease_charges: dict[str, None] = {}  # requests recently charged against a lease, never twice
        self.suspended = False
        self.policy_version = 0  # the version of the last event that changed what the team's keys may do
        self.rpm: int | None = None  # the team's rate limits per minute, shared by its keys
        self.tpm: int | None = None
        self.price_adjustments: dict[str, str] = {}  # model ("": every model) → percent on the price list
        self.clamp_output = False  # the team's keys get what their balance covers instead of 402
        self.adjustment_references: dict[str, None] = {}  # each names one adjustment: none is made twice
        self.budget: Budget | None = None  # the team's own budget (``domain/budgets.py``)
        self.spend: dict[str, dict[str, list[Any]]] = {}  # key id ("": the team) → spend per period
        self.key_held: dict[str, int] = {}  # key id → what its requests' holds hold now
        self.alert_thresholds: dict[str, dict[str, Any]] = {}  # Threshold.name → the threshold (domain/alerts.py)
        self.rerates: dict[str, dict[str, Any]] = {}  # re-rate reference → its period and models (domain/rerates.py)
        self.lots: dict[str, Lot] = {}  # lot id → a lot of credit with something left (domain/credit_lots.py)
        self.owed = 0  # what a refund or dispute took beyond the balance: the next credit pays it first
        self.payments: dict[str, Payment] = {}  # payment id → the credit it bought (domain/ledger_payments.py)
        self.recharge: Recharge | None = None  # auto-recharge's settings and state (domain/auto_recharge.py)
        self.next_expiry: float | None = None  # the soonest expiry of a lot with credit left (Unix time)

    @property
    def available(self) -> int:
        return self.balance - self.held

    def hold_room(self, until: float) -> int:
        """What a new hold or lease may take: the available balance, less the credit that will have
        expired by ``until`` (Unix time: when the request could settle at the latest), less what the
        team owes (negative while it owes more than it has: refused until topped up)."""
        if self.next_expiry is None or self.next_expiry > until:
            return self.available - self.owed
        return min(self.available, spendable(self.lots, until) - self.held) - self.owed

    def held_for(self, held_for: str) -> int:
        """What the hold or lease ``held_for`` holds now (0: none is open)."""
        hold = self.holds.get(held_for)
        return hold.amount if hold is not None else 0

    def close_hold(self, request_id: str) -> Hold:
        """Close an open hold (charged or released): forget it, and what its key and its
        Idempotency-Key counted of it; returns it."""
        hold = self.holds.pop(request_id)
        if hold.key_id is not None:
            if (still := self.key_held.get(hold.key_id, 0) - hold.amount) > 0:
                self.key_held[hold.key_id] = still
            else:
                self.key_held.pop(hold.key_id, None)
        if hold.idem_key and self.idem_holds.get(hold.idem_key) == request_id:
            del self.idem_holds[hold.idem_key]
        return hold

    # -- policies -----------------------------------------------------------------------------

    def key(self, key_id: str) -> KeyPolicy:
        """The key's policy (``KeyNotFound``: the team has no such key)."""
        try:
            return self.keys[key_id]
        except KeyError:
            raise KeyNotFound(self.name, key_id) from None

    def budget_of(self, key_id: str = "") -> Budget | None:
        """The key's budget (no key: the team's), if it has one."""
        return self.key(key_id).budget if key_id else self.budget

    def budget_left(self, key_id: str, at: datetime) -> tuple[int, Budget, str] | None:
        """The tightest budget a request of ``key_id`` (``""``: none, a lease) is held against at
        ``at``: what it has left (its limit, less what was spent this period, less what is held
        against it; negative if a lowered limit is overspent), the budget, and whose it is (a key
        id, or ``""`` for the team's). None if neither the key nor the team has a budget."""
        tightest: tuple[int, Budget, str] | None = None
        key = self.keys.get(key_id)
        scopes = [(key_id, key.budget, self.key_held.get(key_id, 0))] if key is not None else []
        for scope, budget, held in (*scopes, ("", self.budget, self.held)):
            if budget is None:
                continue
            left = budget.limit - spent_in(self.spend.get(scope), budget.period, at) - held
            if tightest is None or left < tightest[0]:
                tightest = (left, budget, scope)
        return tightest

    def key_budget_left(self, key_id: str, at: datetime, charged: int, hold: int) -> int | None:
        """What the key's budget will have left once ``charged`` is debited and its ``hold`` closed
        (None: the key has no budget)."""
        key = self.keys.get(key_id)
        budget = key.budget if key is not None else None
        if budget is None:
            return None
        spent = spent_in(self.spend.get(key_id), budget.period, at) + charged
        held = self.key_held.get(key_id, 0) - hold
        return max(0, budget.limit - spent - held)

    def adjustment_for(self, model: str) -> str:
        """The team's price adjustment for ``model``, in percent (``""``: none)."""
        return self.price_adjustments.get(model) or self.price_adjustments.get("", "")

    def clamps_output(self, key_id: str) -> bool:
        """Whether requests of the key get what the balance covers instead of 402."""
        key = self.keys.get(key_id)
        own = key.clamp if key is not None else None
        return own if own is not None else self.clamp_output
