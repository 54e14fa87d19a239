"""Re-rating: a team's charges over a period priced again at another price list, history untouched.

Each charge recorded its usage (every billed dimension, the tier served, the tool calls) and the
team's price adjustment of the time, so pricing it again is the same arithmetic with other rates —
and the same rounding rule, once per request: re-rated at the prices the charges were made at, the
totals come out exactly as recorded. The difference per model and key is what a correction would
move; ``tollgate ledger rerate --apply`` records it as adjustments (``TeamLedger.CreditsAdjusted``),
never by editing a charge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from domain.ledger import TeamLedger, team_id
from domain.pricing import Price, TokenUsage, price_usage
from projections.event_store import LedgerStore


@dataclass
class RerateLine:
    """The charges of one model and key in the period: what they cost and what they re-rate to."""

    model: str
    key_id: str
    charges: int = 0
    recorded: int = 0  # micro-credits, the charges' costs as recorded
    rerated: int = 0  # micro-credits, at the other price list

    @property
    def difference(self) -> int:
        """What the team was charged beyond the other price list (negative: too little)."""
        return self.recorded - self.rerated


@dataclass
class RerateReport:
    team: str
    start: datetime
    end: datetime
    lines: dict[tuple[str, str], RerateLine] = field(default_factory=dict)
    unpriced: dict[str, int] = field(default_factory=dict)  # models the price list lacks → charges left as they are

    @property
    def recorded(self) -> int:
        return sum(line.recorded for line in self.lines.values())

    @property
    def rerated(self) -> int:
        return sum(line.rerated for line in self.lines.values())


def rerate(store: LedgerStore, team: str, start: datetime, end: datetime, prices: Mapping[str, Price]) -> RerateReport:
    """Every charge of ``team`` made in ``[start, end)`` priced again at ``prices`` (by model): the
    team's events from its state at ``start`` (found from its snapshots) to ``end``, a page at a time."""
    report = RerateReport(team, start, end)
    before, _ = store.load_team(team_id(team), at=start)
    for event in store.events_after(team_id(team), before.version if before is not None else 0):
        if event.timestamp >= end:
            break
        if not isinstance(event, TeamLedger.Charged) or event.timestamp < start:
            continue
        price = prices.get(event.model)
        if price is None:
            report.unpriced[event.model] = report.unpriced.get(event.model, 0) + 1
            continue
        line = report.lines.setdefault((event.model, event.key_id), RerateLine(event.model, event.key_id))
        line.charges += 1
        line.recorded += event.cost
        line.rerated += price_usage(TokenUsage.from_record(event.usage), price, Decimal(event.credits_per_usd),
                                    Decimal(event.adjustment or 0)).micros
    return report
