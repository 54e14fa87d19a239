"""Auto-recharge: a team's balance topped up from its saved payment method when a charge takes it
below a threshold, up to a target, within a monthly cap.

The rules are here, the facts on the team's ledger (``domain/ledger_recharge.py``): the settings
(``AutoRechargeSet``), each attempt begun (``RechargeStarted``, one at a time: a second is never
begun while one is pending), and each failure (``RechargeFailed``); a success is the payment's credit
(``CreditsAdded`` naming the attempt), which counts only once the payment has succeeded. After
:data:`MAX_FAILURES` failures in a row auto-recharge turns itself off and raises an alert.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from domain.ledger_errors import InvalidAmount

#: Failed payments in a row after which auto-recharge turns itself off.
MAX_FAILURES = 3
#: Seconds after a failed attempt before the next may begin: a declined card is not asked again at
#: once (a burst of traffic would otherwise spend the three attempts within a second).
RETRY_SECONDS = 600


class Recharge(msgspec.Struct, frozen=True, gc=False):
    """A team's auto-recharge: its settings and where it stands."""

    threshold: int  # micro-credits: a charge taking the available balance below it begins an attempt
    target: int  # micro-credits: what the available balance is topped up to
    monthly_cap: int  # micro-credits recharged at most per UTC calendar month
    enabled: bool = True
    failures: int = 0  # failed attempts in a row
    pending: str = ""  # the attempt begun and not yet settled ("": none)
    pending_amount: int = 0
    month: str = ""  # the UTC month ``month_total`` counts (YYYY-MM)
    month_total: int = 0  # what attempts begun this month asked for
    failed_at: float = 0.0  # when the last attempt failed (POSIX seconds; 0: none since the last success)


class RechargeSetting(msgspec.Struct, frozen=True, gc=False):
    """What an operator or the team sets (micro-credits); ``enabled`` False turns it off."""

    threshold: int = 0
    target: int = 0
    monthly_cap: int = 0
    enabled: bool = True


def check_settings(threshold: int, target: int, monthly_cap: int) -> None:
    """Refuse settings that could never recharge or would recharge in a loop."""
    for name, value in (("threshold", threshold), ("target", target), ("monthly_cap", monthly_cap)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidAmount(f"auto-recharge's {name} must be a whole, non-negative number of micro-credits")
    if target <= threshold:
        raise InvalidAmount(
            "auto-recharge's target must be above its threshold (or a recharge would begin again at once)"
        )
    if monthly_cap <= 0:
        raise InvalidAmount("auto-recharge's monthly cap must be above zero")


def month_of(at: datetime) -> str:
    return at.strftime("%Y-%m")


def amount_due(recharge: Recharge | None, available: int, at: datetime) -> int:
    """What an attempt begun now would ask for (0: none is due): the difference up to the target,
    when the available balance is under the threshold, nothing is pending, the last failure is
    :data:`RETRY_SECONDS` old, and as far as this month's cap goes."""
    if recharge is None or not recharge.enabled or recharge.pending or available >= recharge.threshold:
        return 0
    if recharge.failures and at.timestamp() < recharge.failed_at + RETRY_SECONDS:
        return 0
    spent = recharge.month_total if recharge.month == month_of(at) else 0
    return max(0, min(recharge.target - available, recharge.monthly_cap - spent))
