"""What the ledger service's methods answer: one frozen dataclass per kind of answer.

Each method of ``LedgerService`` says in its signature which of these it returns, so a caller
reads its fields instead of telling results apart by their class; a refusal is the domain's
exception (``domain/ledger_errors.py``), answered over HTTP once, in ``app/http/refusals.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from app.store.log_append import LoggedLeaf
from app.store.read_models import IdempotentResponse
from domain.auto_recharge import Recharge
from domain.budgets import spent_in
from domain.credit_lots import order_key
from domain.ledger import TeamLedger
from domain.pricing import Cost


@dataclass(frozen=True, slots=True)
class Held:
    """A request's hold, decided: what the team has available after it, or, for a request under an
    Idempotency-Key that was served before, the answer stored then (and no hold was placed)."""

    available: int
    stored_answer: IdempotentResponse | None = None


@dataclass(frozen=True, slots=True)
class AnswerToStore:
    """The answer to store under a request's Idempotency-Key with its charge, in the same
    transaction: ``render`` makes its body (after ``prefix``, the frames a stream already sent)
    from the charge, on the writer thread, so the stored answer is exactly the one sent."""

    idem_key: str
    body_hash: str
    content_type: str
    prefix: bytes
    ttl: float
    render: Callable[[TeamLedger.Charged, Cost], bytes]


@dataclass(frozen=True, slots=True)
class Charged:
    """A request's charge, durable: the ``Charged`` event; for a request held against a credit
    lease, what the lease holds after it (``lease_left``); and the body rendered and stored under
    its Idempotency-Key, if one was (``answer``)."""

    event: TeamLedger.Charged
    lease_left: int | None = None
    answer: bytes | None = None
    cost: Cost | None = None  # what the cost is made of, as the command computed it
    leaf: LoggedLeaf | None = None  # the event's leaf in the transparency log (for the receipt)


@dataclass(frozen=True, slots=True)
class Released:
    """A request's hold ended without a charge; ``available``: what the team has available after."""

    available: int


@dataclass(frozen=True, slots=True)
class Leased:
    """A credit lease grown; ``remaining``: what the ledger now holds for it."""

    remaining: int


@dataclass(frozen=True, slots=True)
class ReleasedHolds:
    """The holds and leases a sweep released (their request or lease ids)."""

    held_by: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Limits:
    """Rate limits per minute; ``None`` leaves a limit as it is, 0 removes it."""

    rpm: int | None = None
    tpm: int | None = None

    @property
    def given(self) -> bool:
        return self.rpm is not None or self.tpm is not None

    def merged(self, rpm: int | None, tpm: int | None) -> tuple[int | None, int | None]:
        return (rpm if self.rpm is None else self.rpm), (tpm if self.tpm is None else self.tpm)


#: No rate limit given: each stays as it is.
NO_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class KeyTerms:
    """What a new key may do: only these models and endpoints (None: any), within these rate limits."""

    models: list[str] | None = None
    endpoints: list[str] | None = None
    limits: Limits = NO_LIMITS


#: A key for any model and endpoint, within the team's limits only.
ANY_USE = KeyTerms()


@dataclass(frozen=True, slots=True)
class AlertSetting:
    """An alert threshold to set, or (``enabled`` False) remove: ``kind`` at ``value`` (a percent of a
    budget, or micro-credits of the balance) for the key ``key_id`` (``""``: the team)."""

    kind: str
    value: Decimal
    key_id: str = ""
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class TeamSummary:
    name: str
    balance: int
    held: int
    suspended: bool = False
    rpm: int | None = None
    tpm: int | None = None
    clamp_output: bool = False
    price_adjustments: tuple[tuple[str, str], ...] = ()  # (model or "" for every model, percent)
    budget: BudgetSummary | None = None  # the team's own budget, where it stands now

    @classmethod
    def of(cls, team: TeamLedger) -> TeamSummary:
        return cls(
            team.name,
            team.balance,
            team.held,
            team.suspended,
            team.rpm,
            team.tpm,
            team.clamp_output,
            tuple(sorted(team.price_adjustments.items())),
            BudgetSummary.of(team, "", team.now()),
        )


#: What a credit lease's id starts with (``app/ledger/leases.py``); a request's id starts with ``req_``.
LEASE_PREFIX = "lease_"


@dataclass(frozen=True, slots=True)
class OpenHold:
    """Credits set aside and not yet settled: a request's hold, or a gateway process's credit lease
    (which its requests in flight are held against, in that process's memory)."""

    held_for: str  # the request id, or the lease id
    amount: int
    since: float  # Unix time it was placed (a lease: last grown or used)
    lease: bool


@dataclass(frozen=True, slots=True)
class CreditLot:
    """A lot of the team's credit with something left (``domain/credit_lots.py``), in the order
    charges draw them."""

    lot_id: str
    kind: str
    amount: int  # what it brought (0: the legacy lot, from before lots)
    remaining: int
    added: float  # Unix time (0: the legacy lot)
    expires: float | None
    priority: int
    reference: str

    @classmethod
    def all_of(cls, team: TeamLedger) -> tuple[CreditLot, ...]:
        ordered = sorted(team.lots.items(), key=lambda item: order_key(*item))
        return tuple(
            cls(lot_id, lot.kind, lot.amount, lot.remaining, lot.added, lot.expires, lot.priority, lot.reference)
            for lot_id, lot in ordered
        )


@dataclass(frozen=True, slots=True)
class Funds:
    """A team's money as a client asks for it (``GET /v1/credits``): the balance, what is held,
    hold by hold, and what was ever charged (``spent``, from the once-only charge index up to the
    same version: the balance is what was ever credited less that)."""

    name: str
    version: int
    balance: int
    held: int
    holds: tuple[OpenHold, ...]
    spent: int = 0
    lots: tuple[CreditLot, ...] = ()
    owed: int = 0
    recharge: Recharge | None = None  # auto-recharge's settings and where they stand (None: never set)

    @property
    def credited(self) -> int:
        return self.balance + self.spent

    @classmethod
    def of(cls, team: TeamLedger) -> Funds:
        holds = tuple(
            OpenHold(held_for, hold.amount, hold.placed, held_for.startswith(LEASE_PREFIX))
            for held_for, hold in team.holds.items()
        )
        return cls(
            team.name,
            team.version,
            team.balance,
            team.held,
            holds,
            lots=CreditLot.all_of(team),
            owed=team.owed,
            recharge=team.recharge,
        )


@dataclass(frozen=True, slots=True)
class BudgetSummary:
    """Where a key's (or a team's) budget stands at an instant: its limit per period, what was spent
    in this period, what requests in flight hold against it, and when the period ends."""

    limit: int
    period: str
    spent: int
    held: int
    resets_at: datetime | None

    @property
    def left(self) -> int:
        return max(0, self.limit - self.spent - self.held)

    @classmethod
    def of(cls, team: TeamLedger, key_id: str, at: datetime) -> BudgetSummary | None:
        """The key's budget (``key_id`` empty: the team's) at ``at``, or None if it has none."""
        budget = team.budget_of(key_id)
        if budget is None:
            return None
        held = team.key_held.get(key_id, 0) if key_id else team.held
        return cls(
            budget.limit, budget.period, spent_in(team.spend.get(key_id), budget.period, at), held, budget.resets_at(at)
        )


@dataclass(frozen=True, slots=True)
class KeySummary:
    """A key as an operator sees it: never its secret or hash."""

    key_id: str
    label: str
    revoked: bool
    models: tuple[str, ...]
    endpoints: tuple[str, ...] = ()
    rpm: int | None = None
    tpm: int | None = None
    clamp_output: bool = False  # the key's own choice, or its team's
    budget: BudgetSummary | None = None  # the key's own budget, where it stands now

    @classmethod
    def of(cls, team: TeamLedger, key_id: str) -> KeySummary:
        k = team.keys[key_id]
        return cls(
            key_id,
            k.label,
            k.revoked,
            k.models,
            k.endpoints,
            k.rpm,
            k.tpm,
            team.clamps_output(key_id),
            BudgetSummary.of(team, key_id, team.now()),
        )


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A key just issued: its id, and its secret, which is never seen again."""

    key_id: str
    secret: str
