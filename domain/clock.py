"""The instant the ledger judges budgets at.

Whether a request fits in a budget depends on which day, week or month it is, and the charge's
timestamp decides which period its spend counts in. Both come from :func:`now`, which is the UTC
wall clock unless the process was told to run shifted (``TOLLGATE_CLOCK_OFFSET``, read by the app at
start-up): a drill, or a test that must cross midnight without waiting for it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

_offset = timedelta()


def now() -> datetime:
    """The current instant, in UTC (shifted if the process was told to be)."""
    return datetime.now(UTC) + _offset


def shift(by: timedelta) -> None:
    """Run this process's ledger clock ``by`` ahead of the wall clock (behind, if negative)."""
    global _offset  # one clock per process, set once at start-up
    _offset = by
