"""``TOLLGATE_CLOCK_OFFSET``: run this process's ledger clock shifted, in seconds (``domain/clock.py``).

Budgets are judged by the UTC day, week or month it is; a drill or a test that must see a period
end (a key's daily budget reset at midnight) sets the offset rather than wait for midnight. Unset
(the default) the clock is the wall clock. It shifts only what the ledger judges budgets by and
timestamps charges with: a process shifted far from the others would count its charges in another
period than theirs, so production gateways never set it.
"""

from __future__ import annotations

import os
from datetime import timedelta

from domain import clock

CLOCK_OFFSET_ENV = "TOLLGATE_CLOCK_OFFSET"


class ClockOffsetError(ValueError):
    pass


def shift_clock_from_environment() -> None:
    text = os.environ.get(CLOCK_OFFSET_ENV, "").strip()
    if not text:
        return
    try:
        seconds = float(text)
    except ValueError:
        raise ClockOffsetError(f"{CLOCK_OFFSET_ENV} must be a number of seconds, not {text!r}") from None
    clock.shift(timedelta(seconds=seconds))
