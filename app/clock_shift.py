"""``TOLLGATE_CLOCK_OFFSET``: run this process's ledger clock shifted, in seconds (``domain/clock.py``).

Budgets are judged by the UTC day, week or month it is; a drill or a test that must see a period
end (a key's daily budget reset at midnight) sets the offset rather than wait for midnight. Unset
(the default) the clock is the wall clock.

An offset is honoured only beside ``TOLLGATE_CLOCK_DRILL=1``, and only ahead of the wall clock, by
at most 31 days (enough to reach the end of any budget's period); otherwise the process refuses to
start. A clock run ahead brings the periods of the teams it charges forward — every process then
judges those teams at the later instant (``TeamLedger.now``), so no period's budget is spent twice —
which is what a drill wants and never what production does: a stray offset left in an environment
used to let a key spend its exhausted daily budget again the same day (+1 day), and a clock run behind
(−31 days) fell before every price in the price list, so each request was served and then failed to
be charged (500).
"""

from __future__ import annotations

import os
from datetime import timedelta
from decimal import Decimal, InvalidOperation

from domain import clock
from domain.bounds import CLOCK_OFFSET

CLOCK_OFFSET_ENV = "TOLLGATE_CLOCK_OFFSET"
CLOCK_DRILL_ENV = "TOLLGATE_CLOCK_DRILL"


class ClockOffsetError(ValueError):
    pass


def shift_clock_from_environment() -> Decimal:
    """Shift the ledger clock as the environment says (a drill's); returns by how many seconds (0: not)."""
    text = os.environ.get(CLOCK_OFFSET_ENV, "").strip()
    if not text:
        return Decimal(0)
    try:
        seconds = Decimal(text)
    except InvalidOperation:
        raise ClockOffsetError(f"{CLOCK_OFFSET_ENV} must be a number of seconds, not {text!r}") from None
    if os.environ.get(CLOCK_DRILL_ENV, "").strip() != "1":
        raise ClockOffsetError(
            f"{CLOCK_OFFSET_ENV} is set ({text}) but {CLOCK_DRILL_ENV} is not 1: a shifted "
            "ledger clock is for drills and tests only; unset it, or set both for a drill on a "
            "ledger of its own"
        )
    wrong = CLOCK_OFFSET.violation(seconds)
    if wrong is not None:
        raise ClockOffsetError(f"{CLOCK_OFFSET_ENV} {wrong} (ahead of the wall clock, never behind it), got {text}")
    clock.shift(timedelta(seconds=float(seconds)))
    return seconds
