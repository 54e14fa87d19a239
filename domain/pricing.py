"""Pricing: what a request costs, from token usage and a model's price table.

Prices are USD per million tokens (as providers publish them). Because a price per *million*
tokens times a number of tokens, times credits-per-USD, times a million micro-credits per credit
is just ``tokens × price × credits_per_usd`` micro-credits, costs are exact ``Decimal``s until the
one rounding rule in :mod:`domain.money` turns a request's total into whole micro-credits.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from domain.money import round_up_to_micros


@dataclass(frozen=True, slots=True)
class Price:
    """A model's price table, in USD per million tokens of each kind."""

    input: Decimal
    output: Decimal
    cache_create: Decimal
    cache_hit: Decimal

    def as_record(self) -> dict[str, str]:
        """The price as stored in a charge event (strings keep every digit)."""
        return {
            "input": str(self.input),
            "output": str(self.output),
            "cache_create": str(self.cache_create),
            "cache_hit": str(self.cache_hit),
        }

    @classmethod
    def from_record(cls, record: dict[str, str]) -> Price:
        return cls(*(Decimal(record[k]) for k in ("input", "output", "cache_create", "cache_hit")))

    @property
    def highest_input(self) -> Decimal:
        """The dearest way a prompt token can be billed (plain, cache write or cache hit)."""
        return max(self.input, self.cache_create, self.cache_hit)


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Tokens of one request by the kind they are billed as.

    ``input_tokens`` are the prompt tokens that were neither written to nor read from a cache;
    the prompt as a whole is ``input_tokens + cache_write_tokens + cache_hit_tokens``.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_hit_tokens: int = 0

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens", "cache_write_tokens", "cache_hit_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_write_tokens + self.cache_hit_tokens

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    def as_record(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_hit_tokens": self.cache_hit_tokens,
        }

    @classmethod
    def from_record(cls, record: dict[str, int]) -> TokenUsage:
        return cls(**record)


def cost_in_micros(usage: TokenUsage, price: Price, credits_per_usd: Decimal) -> int:
    """The cost of ``usage`` at ``price``, in whole micro-credits (rounded up once)."""
    exact = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_write_tokens * price.cache_create
        + usage.cache_hit_tokens * price.cache_hit
    ) * credits_per_usd
    return round_up_to_micros(exact)


def worst_case_in_micros(
    prompt_token_bound: int, max_output_tokens: int, price: Price, credits_per_usd: Decimal
) -> int:
    """The most a request can cost: every prompt token at the dearest input price, every
    allowed output token at the output price. This is what a hold reserves."""
    exact = (prompt_token_bound * price.highest_input + max_output_tokens * price.output) * credits_per_usd
    return round_up_to_micros(exact)
