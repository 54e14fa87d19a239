"""Alert thresholds, and when a charge or a correction crosses one.

A team sets thresholds on what it wants to hear about: a budget (its own, or a key's) passing a
share of its limit (``budget_percent``, e.g. 80), or its balance falling below an amount
(``balance_below``, micro-credits). The ledger judges them in the very command that moves the money,
so an alert is recorded once per crossing — when the charge takes the spend from under the line to
on or over it — and never from a count that could drift: the next period's spend starts under the
line again, and a top-up lifts the balance back over it, so the next crossing is a new alert.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from domain.bounds import BALANCE_ALERT, BUDGET_ALERT_PERCENT, Bound

BUDGET_PERCENT = "budget_percent"
BALANCE_BELOW = "balance_below"
KINDS = (BUDGET_PERCENT, BALANCE_BELOW)


@dataclass(frozen=True, slots=True)
class Threshold:
    """``kind`` at ``value`` (a percent for a budget, micro-credits for the balance), for the key
    ``key_id`` (``""``: the team)."""

    key_id: str
    kind: str
    value: str

    @property
    def name(self) -> str:
        """The threshold's identity among the team's: one per key, kind and value."""
        return f"{self.key_id}|{self.kind}|{self.value}"

    def as_record(self) -> dict[str, Any]:
        return {"key_id": self.key_id, "kind": self.kind, "value": self.value}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Threshold:
        return cls(str(record["key_id"]), str(record["kind"]), str(record["value"]))


def check_threshold(kind: str, value: Decimal, key_id: str) -> str:
    """The threshold's value as recorded, or ``ValueError`` saying what is wrong with it."""
    if kind not in KINDS:
        raise ValueError(f"an alert is one of {', '.join(KINDS)}, not {kind!r}")
    if not value.is_finite():
        raise ValueError(f"an alert's threshold must be a number, got {value}")
    if kind == BUDGET_PERCENT:
        _in_range(BUDGET_ALERT_PERCENT, value)
        return f"{value.normalize():f}"
    if key_id:
        raise ValueError("a balance alert is the team's (a key has no balance of its own)")
    if value != int(value):
        raise ValueError(f"a balance alert is a whole number of micro-credits, got {value}")
    _in_range(BALANCE_ALERT, int(value))
    return str(int(value))


def _in_range(bound: Bound, value: int | Decimal) -> None:
    problem = bound.problem(value)
    if problem is not None:
        raise ValueError(problem)


def budget_line(limit: int, percent: str) -> Decimal:
    """The spend at which a budget of ``limit`` reaches ``percent`` of it (exact)."""
    return Decimal(limit) * Decimal(percent) / 100


def crossed_up(before: int, after: int, line: Decimal) -> bool:
    """Whether a spend going from ``before`` to ``after`` reached ``line`` (it was under it)."""
    return before < line <= after


def crossed_down(before: int, after: int, line: Decimal) -> bool:
    """Whether a balance going from ``before`` to ``after`` fell under ``line`` (it was not)."""
    return before >= line > after


def alert_id(team: UUID, version: int) -> str:
    """An alert's id, the same however often the history is replayed or delivered: the webhook
    receiver's idempotency key."""
    return "alert_" + uuid5(NAMESPACE_URL, f"tollgate:alert/{team}/{version}").hex
