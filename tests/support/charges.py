"""What the fake models cost and what a team has left: the arithmetic the end-to-end suites check
their answers against, in one place."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from tests.support.gateway import Gateway
from tests.support.teams import Team

HELLO = [{"role": "user", "content": "hello there gateway"}]


def micros(usage_prompt: int, usage_completion: int, cached: int = 0) -> int:
    """fake-gpt's price: $2.5/M input, $10/M output, $1.25/M cache hits; 100 credits per USD."""
    exact = ((usage_prompt - cached) * Decimal("2.5") + usage_completion * 10 + cached * Decimal("1.25")) * 100
    return int(exact.to_integral_value(rounding="ROUND_CEILING"))


def balance_of(gateway: Gateway, team_name: str) -> Decimal:
    """A team's balance as the operator's CLI reports it (``tollgate team show``)."""
    line = gateway.cli("team", "show", team_name).stdout
    return Decimal(line.split("balance ")[1].split(" ")[0])


def reported(usage: Any) -> int:
    """The cost an answer's ``usage`` reports (Tollgate's ``cost.credits``), in micro-credits: exact,
    a whole number of them."""
    micros = Decimal(str(usage.model_extra["cost"]["credits"])) * 1_000_000
    assert micros == micros.to_integral_value()
    return int(micros)


def charged(gateway: Gateway, team: Team) -> list[int]:
    """The team's charges in the ledger, oldest first, in micro-credits."""
    return [-charge["amount"] for charge in gateway.charges(team.name)]
