"""Budgets in the simulated world: some teams may spend only so much a UTC day, and no process, on
any interleaving, may let them spend more (Bifrost's budgets overshoot by N× with N replicas).

A team's daily budget is set when it is opened; every charge is counted, from the stored events, in
the day of its own instant (the ledger clock's); after every step, no team's day may have charged
more than its limit: the bound is 0.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field

from domain.ledger import TeamLedger


@dataclass
class DailyBudgets:
    """The limits set, and what each team's charges add up to, per UTC day."""

    limits: dict[str, int] = field(default_factory=dict)
    spent: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))

    def maybe_set(self, team: TeamLedger, rng: random.Random) -> None:
        """Give the team a daily budget, two times in three (a tight one, sometimes)."""
        if rng.random() < 1 / 3:
            return
        limit = rng.choice([50_000, 200_000, 1_000_000])
        team.set_budget(limit, "day")
        self.limits[team.name] = limit

    def count(self, name: str, event: TeamLedger.Charged) -> str | None:
        """Count a charge in its day; what is wrong, if its day's charges now exceed the budget."""
        limit = self.limits.get(name)
        if limit is None:
            return None
        day = event.timestamp.date().isoformat()
        self.spent[name][day] += event.charged
        if self.spent[name][day] > limit:
            return f"{name} charged {self.spent[name][day]} on {day}, past its daily budget of {limit}"
        return None
