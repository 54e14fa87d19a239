"""Re-rating: a team's charges over a period priced again at another price list, history untouched.

Each charge recorded its usage (every billed dimension, the tier served, the tool calls) and the
team's price adjustment of the time, so pricing it again is the same arithmetic with other rates —
and the same rounding rule, once per request: re-rated at the prices the charges were made at, the
totals come out exactly as recorded. What a correction would move is worked out per charge from what
it *collected* (its cost less what was left uncollected), never from its cost: a charge cut short by
its budget or balance is refunded at most what it collected beyond its new cost (``domain/rerates.py``).
``tollgate ledger rerate --apply`` records it as adjustments (``TeamLedger.apply_rerate``), never by
editing a charge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from app.store.event_store import LedgerStore
from domain.ledger import TeamLedger, team_id
from domain.pricing import Price, price_usage
from domain.rerates import rerated_collection
from domain.usage import TokenUsage


@dataclass
class RerateLine:
    """The charges of one model and key in the period: what they cost and what they re-rate to."""

    model: str
    key_id: str
    charges: int = 0
    recorded: int = 0  # micro-credits, the charges' costs as recorded
    rerated: int = 0  # micro-credits, at the other price list
    collected: int = 0  # micro-credits the charges took (their costs less what was left uncollected)
    adjustment: int = 0  # what a correction moves: a refund (> 0) of what was collected beyond, or a debit


@dataclass
class RerateReport:
    team: str
    start: datetime
    end: datetime
    lines: dict[tuple[str, str], RerateLine] = field(default_factory=dict)
    unpriced: dict[str, int] = field(default_factory=dict)  # models the price list lacks → charges left as they are
    #: The team's version the report read through, and whether it read an event at or after ``end``:
    #: the team's events are in time order (``TeamLedger.now``), so then no charge can still come in
    #: the period; until then, a re-rate applies only if the team is still at that version.
    through_version: int = 0
    complete: bool = False

    @property
    def recorded(self) -> int:
        return sum(line.recorded for line in self.lines.values())

    @property
    def rerated(self) -> int:
        return sum(line.rerated for line in self.lines.values())

    @property
    def collected(self) -> int:
        return sum(line.collected for line in self.lines.values())

    @property
    def adjustment(self) -> int:
        return sum(line.adjustment for line in self.lines.values())


def rerate(store: LedgerStore, team: str, start: datetime, end: datetime, prices: Mapping[str, Price]) -> RerateReport:
    """Every charge of ``team`` made in ``[start, end)`` priced again at ``prices`` (by model): the
    team's events from its state at ``start`` (found from its snapshots) to ``end``, a page at a time."""
    report = RerateReport(team, start, end)
    before, _ = store.load_team(team_id(team), at=start)
    report.through_version = before.version if before is not None else 0
    for event in store.events_after(team_id(team), report.through_version):
        if event.timestamp >= end:
            report.complete = True
            break
        report.through_version = event.originator_version
        if not isinstance(event, TeamLedger.Charged) or event.timestamp < start:
            continue
        price = prices.get(event.model)
        if price is None:
            report.unpriced[event.model] = report.unpriced.get(event.model, 0) + 1
            continue
        line = report.lines.setdefault((event.model, event.key_id), RerateLine(event.model, event.key_id))
        table = price.for_batch()[0] if event.batch_id else price  # a batch's line: at the batch price
        cost = price_usage(
            TokenUsage.from_record(event.usage), table, Decimal(event.credits_per_usd), Decimal(event.adjustment or 0)
        ).micros
        line.charges += 1
        line.recorded += event.cost
        line.rerated += cost
        line.collected += event.charged
        line.adjustment += event.charged - rerated_collection(event.charged, event.uncollected, cost)
    return report
