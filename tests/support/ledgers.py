"""Teams to test the aggregate on, and their replay: shared by the domain tests."""

from __future__ import annotations

from decimal import Decimal

from domain.ledger import TeamLedger
from domain.pricing import Price

PRICE = Price(input=Decimal("2.5"), output=Decimal(10), cache_create=Decimal("3.125"), cache_hit=Decimal("1.25"))
CPU = Decimal(100)


def funded(micros: int = 1_000_000) -> TeamLedger:
    team = TeamLedger.open("acme")
    team.add_credits(micros, "opening")
    return team


def replay(team: TeamLedger) -> TeamLedger:
    """The team as its recorded events alone rebuild it (collecting them, as a save does)."""
    copy = None
    for event in team.collect_events():
        copy = event.mutate(copy)
    assert isinstance(copy, TeamLedger)
    return copy
