"""Credit lots: every credit a team gets arrives as a lot, and is used up in one fixed order.

Billing platforms keep credit in lots (Lago's wallets, Orb's credit blocks, Metronome's grants):
paid credit apart from promotional credit (only paid credit is money owed back), each lot with an
optional expiry. A team's balance is the sum of what its lots have left. What a team owes beyond it (a
refund of credit already spent) is kept apart (``owed``): the next credit pays it first, and no hold
is placed while anything is owed.

**The order charges draw lots down** (:func:`draw`), written down once here:

1. the lowest ``priority`` first (an integer, 0–100; 50 unless the lot says otherwise);
2. then the lot that expires soonest (one that never expires last);
3. then promotional credit, then adjustments, then paid credit (paid credit is kept longest: it is
   what a refund gives back);
4. then the oldest (the event that added it came first).

Every event that takes credit records the lots it took it from (``drawn``), so replaying history
gives the same split whatever this order becomes later. Events from before lots carry none: their
credit is the *legacy* lot (paid, never expiring, its original amount unknown), which is all a team
had then, so their split is that lot's.

**Expiry.** A lot's remainder is written off at its expiry instant by a ``CreditsExpired`` event,
recorded before any later event of the team (``TeamLedger.trigger_event``), so it needs no job to be
correct. What open holds still count on is written off once they close (a charge draws the expired
lot first, being the soonest to expire); new holds never count on credit that expires before they
could settle (:func:`spendable`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import msgspec

from domain.credit_lot import DEFAULT_PRIORITY, Lot
from domain.ledger_errors import InvalidAmount

#: The kinds of credit, and the order in which each is drawn at equal priority and expiry.
PROMOTIONAL, ADJUSTMENT, PAID = "promotional", "adjustment", "paid"
KINDS = (PROMOTIONAL, ADJUSTMENT, PAID)
_KIND_RANK = {kind: rank for rank, kind in enumerate(KINDS)}
PRIORITIES = range(101)
#: The lot holding the credit of events recorded before lots (and of a snapshot taken before them).
LEGACY = "legacy"
#: How long a request's hold may stay open, by default (``hold_timeout``'s default; the gateway
#: passes its own): a hold never counts on credit that expires sooner.
SETTLES_WITHIN = 900.0
#: How long a batch's hold may stay open (its 24-hour completion window, and time to collect it).
BATCH_SETTLES_WITHIN = 26 * 3600.0


@dataclass(frozen=True, slots=True)
class LotTerms:
    """The terms a credit comes in on: its kind, when it expires (None: never), its priority."""

    kind: str = PAID
    expires: datetime | None = None
    priority: int = DEFAULT_PRIORITY

    @classmethod
    def parse(cls, kind: str = PAID, expires: str = "", priority: object = DEFAULT_PRIORITY) -> LotTerms:
        """Terms as an operator or a client writes them: ``expires`` in ISO 8601 with its time zone
        (``2026-12-31T23:59:59Z``; ``""``: never). Raises ``InvalidAmount`` saying what is wrong."""
        when = None
        if expires:
            if not isinstance(expires, str) or not _INSTANT.fullmatch(expires):
                raise InvalidAmount(
                    f"a credit lot's expiry must be an ISO 8601 instant with its time zone, got {expires!r:.80}"
                )
            try:
                when = datetime.fromisoformat(expires)
            except ValueError:
                raise InvalidAmount(f"a credit lot's expiry must be an ISO 8601 instant, got {expires!r}") from None
            if when.tzinfo is None:
                raise InvalidAmount(f"a credit lot's expiry must say its time zone (Z or +HH:MM), got {expires!r}")
        if isinstance(priority, str) and priority.strip().lstrip("-").isdigit():
            priority = int(priority)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise InvalidAmount(f"a credit lot's priority must be a whole number from 0 to 100, got {priority!r}")
        return cls(kind, when, priority)

    def check(self, at: datetime) -> None:
        """Refuse (``InvalidAmount``) an unknown kind, an unusable priority, or an expiry that is
        not after ``at`` (when the lot would be added)."""
        if self.kind not in KINDS:
            raise InvalidAmount(f"a credit lot's kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        priority = self.priority
        if not isinstance(priority, int) or isinstance(priority, bool) or priority not in PRIORITIES:
            raise InvalidAmount(f"a credit lot's priority must be a whole number from 0 to 100, got {priority!r}")
        if self.expires is not None and (self.expires.tzinfo is None or self.expires <= at):
            raise InvalidAmount(f"a credit lot must expire after it is added, with a time zone: {self.expires!r}")


#: An instant as a lot's expiry is written: a date, a time, and its zone (``Z`` or ``±HH:MM``).
_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})")

#: Paid credit that never expires: what an operator's top-up is unless it says otherwise.
PAID_FOREVER = LotTerms()


def order_key(lot_id: str, lot: Lot) -> tuple[int, float, int, int, str]:
    """Where a lot comes in the drawing order (the module's docstring)."""
    expires = lot.expires if lot.expires is not None else math.inf
    return (lot.priority, expires, _KIND_RANK.get(lot.kind, len(KINDS)), lot.seq, lot_id)


def draw(lots: Mapping[str, Lot], amount: int) -> dict[str, int]:
    """Which lots ``amount`` is taken from, and how much of each, in the drawing order; what the
    lots cannot cover is not in the split."""
    drawn: dict[str, int] = {}
    left = amount
    for lot_id, lot in sorted(lots.items(), key=lambda item: order_key(*item)):
        if left <= 0:
            break
        take = min(left, lot.remaining)
        if take > 0:
            drawn[lot_id] = take
            left -= take
    return drawn


def spendable(lots: Mapping[str, Lot], until: float) -> int:
    """The credit that is still there at ``until`` (Unix time): what new holds may count on."""
    return sum(lot.remaining for lot in lots.values() if not lot.expired_at(until))


def next_expiry(lots: Mapping[str, Lot]) -> float | None:
    """The soonest expiry of a lot with credit left (None: none expires)."""
    return min((lot.expires for lot in lots.values() if lot.expires is not None and lot.remaining), default=None)


def taken(lots: dict[str, Lot], drawn: Mapping[str, int]) -> int:
    """Take ``drawn`` from ``lots`` (an event's apply), no more than each has; a lot used up is
    forgotten. Returns what was taken."""
    total = 0
    for lot_id, amount in drawn.items():
        lot = lots.get(lot_id)
        if lot is None:
            continue
        if lot.remaining > amount:
            lots[lot_id] = msgspec.structs.replace(lot, remaining=lot.remaining - amount)
            total += amount
        else:
            del lots[lot_id]
            total += lot.remaining
    return total


def credited(lots: dict[str, Lot], lot_id: str, lot: Lot) -> None:
    """Add ``lot`` (an event's apply); the legacy lot grows instead of being replaced. A lot with
    nothing left (all of it paid what was owed) is not kept."""
    remaining = lot.remaining + (lots[lot_id].remaining if lot_id == LEGACY and lot_id in lots else 0)
    if remaining > 0:
        lots[lot_id] = msgspec.structs.replace(lot, remaining=remaining)


def legacy_lot(remaining: int) -> Lot:
    """The lot of credit from before lots: paid, never expiring, its amount not known."""
    return Lot(PAID, 0, remaining, 0.0)
