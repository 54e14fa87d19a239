"""What the fake models cost and what a team has left: the arithmetic the end-to-end suites check
their answers against, in one place."""

from __future__ import annotations

from decimal import Decimal

from tests.support.gateway import Gateway

HELLO = [{"role": "user", "content": "hello there gateway"}]


def micros(usage_prompt: int, usage_completion: int, cached: int = 0) -> int:
    """fake-gpt's price: $2.5/M input, $10/M output, $1.25/M cache hits; 100 credits per USD."""
    exact = ((usage_prompt - cached) * Decimal("2.5") + usage_completion * 10 + cached * Decimal("1.25")) * 100
    return int(exact.to_integral_value(rounding="ROUND_CEILING"))


def balance_of(gateway: Gateway, team_name: str) -> Decimal:
    """A team's balance as the operator's CLI reports it (``tollgate team show``)."""
    line = gateway.cli("team", "show", team_name).stdout
    return Decimal(line.split("balance ")[1].split(" ")[0])
