"""The instant the ledger judges budgets at.

Whether a request fits in a budget depends on which day, week or month it is, and the charge's
timestamp decides which period its spend counts in. Both come from :func:`now`, which is the UTC
wall clock unless the process was told to run shifted (``TOLLGATE_CLOCK_OFFSET``, read by the app at
start-up): a drill, or a test that must cross midnight without waiting for it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

_offset = timedelta()
_source: Callable[[], datetime] | None = None


def now() -> datetime:
    """The current instant, in UTC (shifted if the process was told to be)."""
    return (datetime.now(UTC) if _source is None else _source()) + _offset


def run_on(source: Callable[[], datetime] | None) -> None:
    """Read the instant from ``source`` instead of the wall clock (None: the wall clock again): the
    deterministic simulator's simulated time (``scripts/simulate``), never a gateway's."""
    global _source  # the simulator runs one world at a time, on one thread
    _source = source


def shift(by: timedelta) -> None:
    """Run this process's ledger clock ``by`` ahead of the wall clock (behind, if negative)."""
    global _offset  # one clock per process, set once at start-up
    _offset = by
