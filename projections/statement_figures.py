"""What a monthly statement adds up: its month, the usage of a model or key, and the figures the
statement's rows and reconciliation are made of (``projections/statements.py`` fills them as it
replays the month's events)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from domain.money import format_credits

_MONTH = re.compile(r"([0-9]{4})-([0-9]{2})")
#: The years a statement's month may be in: from the Unix epoch (no ledger is older) to the last
#: whose next month a date can still hold.
FIRST_YEAR, LAST_YEAR = 1970, 9998
ONE_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class Month:
    """A UTC calendar month: ``start`` included, ``end`` (the next month's start) not."""

    text: str
    start: datetime
    end: datetime

    @classmethod
    def parse(cls, text: str) -> Month:
        """``2026-11``; ``ValueError`` saying what is wrong for anything else."""
        found = _MONTH.fullmatch(text.strip()) if isinstance(text, str) else None
        if found is None or not 1 <= int(found.group(2)) <= 12:
            raise ValueError(f"a month is written YYYY-MM (e.g. 2026-11), not {text!r}")
        year, month = int(found.group(1)), int(found.group(2))
        if not FIRST_YEAR <= year <= LAST_YEAR:
            raise ValueError(f"a month is from {FIRST_YEAR}-01 to {LAST_YEAR}-12, not {text!r}")
        start = datetime(year, month, 1, tzinfo=UTC)
        end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
        return cls(f"{year:04d}-{month:02d}", start, end)


@dataclass
class Usage:
    """The charges of a model, a key, or all of them."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_hit_tokens: int = 0
    charged: int = 0  # micro-credits taken from the balance
    uncollected: int = 0  # micro-credits the charges cost beyond what the balance could pay

    def add(self, other: Usage) -> None:
        """Count ``other``'s charges in too."""
        for name in (
            "requests",
            "input_tokens",
            "output_tokens",
            "cache_write_tokens",
            "cache_hit_tokens",
            "charged",
            "uncollected",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def tokens(self) -> tuple[int, int, int, int]:
        return self.input_tokens, self.output_tokens, self.cache_write_tokens, self.cache_hit_tokens


@dataclass
class Figures:
    """What a statement adds up (micro-credits), and how the reconciliation went."""

    opening: int = 0
    opening_version: int = 0
    top_ups: int = 0
    top_up_count: int = 0
    top_ups_by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)  # lot kind → (count, amount)
    adjustments: int = 0
    expired: int = 0
    expiry_count: int = 0
    reversed: int = 0  # what refunds and disputes moved (taken back: negative; a dispute won: positive)
    reversal_count: int = 0
    reversal_kinds: dict[str, tuple[int, int]] = field(default_factory=dict)  # kind → (count, amount)
    adjustment_count: int = 0
    recharges: dict[str, tuple[int, int]] = field(default_factory=dict)  # started/credited/failed → (count, amount)
    charges: Usage = field(default_factory=Usage)
    by_model: dict[str, Usage] = field(default_factory=dict)
    by_key: dict[str, Usage] = field(default_factory=dict)
    closing: int = 0
    closing_version: int = 0
    ledger_balance: int = 0  # the ledger's balance at the month's end, loaded apart
    history_entries: int = 0  # the audit history's entries of the month
    problems: list[str] = field(default_factory=list)

    def expiry_text(self) -> str:
        """The expired credit, and what refunds and disputes moved, in the reconciliation's sum
        (nothing in a month with none)."""
        expired = f" - expired {format_credits(self.expired)}" if self.expiry_count else ""
        sign = "+" if self.reversed >= 0 else "-"
        reversed_ = f" {sign} refunds and disputes {format_credits(abs(self.reversed))}" if self.reversal_count else ""
        return expired + reversed_

    @property
    def computed_closing(self) -> int:
        return self.opening + self.top_ups - self.charges.charged + self.adjustments - self.expired + self.reversed

    @property
    def reconciled(self) -> bool:
        return not self.problems
