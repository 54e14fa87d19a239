"""Spending budgets: how much a key (or a whole team) may spend per UTC calendar period.

A budget is a limit and a period (``day``, ``week`` — ISO weeks, from Monday —, ``month``, or
``none`` for a lifetime limit). What was spent in a period is counted from the ``Charged`` events'
own timestamps: the count belongs to the period its last charge fell in, and a charge in a later
period starts a new count. So a budget resets because the events say the period changed, not
because a job ran at midnight; replaying the history gives the same counts, and a period in which
nothing was charged needs no event at all.

The ledger holds a request against a budget exactly as against the balance: its worst case must fit
in what the budget has left (its limit, less what was spent this period, less what its requests in
flight hold), so concurrent requests can never spend past it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

PERIODS = ("day", "week", "month", "none")
#: OpenRouter's names for the periods (``GET /v1/key``'s ``limit_reset``).
RESET_NAMES = {"day": "daily", "week": "weekly", "month": "monthly", "none": None}


def period_of(period: str, at: datetime) -> str:
    """The name of the ``period`` that instant ``at`` falls in: ``2026-11-26``, ``2026-W48``,
    ``2026-11``; ``""`` for a lifetime."""
    at = at.astimezone(UTC)
    if period == "day":
        return at.date().isoformat()
    if period == "week":
        year, week, _ = at.isocalendar()
        return f"{year}-W{week:02d}"
    if period == "month":
        return f"{at.year:04d}-{at.month:02d}"
    return ""


def period_end(period: str, at: datetime) -> datetime | None:
    """When the ``period`` that ``at`` falls in ends (the next one starts); None for a lifetime."""
    at = at.astimezone(UTC)
    midnight = at.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return midnight + timedelta(days=1)
    if period == "week":
        return midnight + timedelta(days=7 - at.weekday())
    if period == "month":
        first = midnight.replace(day=1)
        return (
            first.replace(year=first.year + 1, month=1) if first.month == 12 else first.replace(month=first.month + 1)
        )
    return None


@dataclass(frozen=True, slots=True)
class Budget:
    """A limit (micro-credits) per period, and where it stands at an instant."""

    limit: int
    period: str

    def as_record(self) -> dict[str, Any]:
        return {"limit": self.limit, "period": self.period}

    @classmethod
    def from_record(cls, record: dict[str, Any] | None) -> Budget | None:
        return cls(int(record["limit"]), str(record["period"])) if record else None

    def resets_at(self, at: datetime) -> datetime | None:
        return period_end(self.period, at)


def period_names(at: datetime) -> dict[str, str]:
    """The name of every kind of period instant ``at`` falls in (worked out once per charge)."""
    day = at.astimezone(UTC).date()
    year, week, _ = day.isocalendar()
    name = day.isoformat()
    return {"day": name, "week": f"{year}-W{week:02d}", "month": name[:7], "none": ""}


def counted(spend: dict[str, list[Any]] | None, amount: int, names: dict[str, str]) -> dict[str, list[Any]]:
    """What a key (or a team) spent, per kind of period (``{period: [its name, micro-credits]}``),
    once a charge of ``amount`` made in the periods ``names`` (:func:`period_names`) is added: a
    count of an earlier period starts again from this charge. A new value, never a change to
    ``spend`` (a team's copy shares it until then)."""
    out: dict[str, list[Any]] = {}
    for period, name in names.items():
        before = spend.get(period) if spend else None
        out[period] = [name, amount + (int(before[1]) if before and before[0] == name else 0)]
    return out


def spent_in(spend: dict[str, list[Any]] | None, period: str, at: datetime) -> int:
    """What was spent in the ``period`` instant ``at`` falls in (0 if the count is of an earlier one)."""
    if spend is None:
        return 0
    name, amount = spend[period]
    return int(amount) if name == period_of(period, at) else 0


def parse_period(text: str) -> str:
    """A period as an operator writes it (``day``/``daily``, …); ``ValueError`` if it is none of them."""
    value = text.strip().lower()
    aliases = {"daily": "day", "weekly": "week", "monthly": "month", "lifetime": "none", "total": "none"}
    value = aliases.get(value, value)
    if value not in PERIODS:
        raise ValueError(f"a budget's period is day, week, month or none, not {text!r}")
    return value
