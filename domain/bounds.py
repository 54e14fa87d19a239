"""The range of every number an operator sets, in one place.

A number an operator types — a rate limit, an amount of credits, a budget, an alert's threshold, a
price, a team's price adjustment, how many streams a key may have open — is checked here before
anything is recorded, whichever way it came (the admin API, the CLI, the configuration file). A
value out of range used to be accepted and break something later and elsewhere: a team's rpm of
2**70 was recorded, and then every key issued to the team failed in the key directory's 64-bit
column. The ranges are far beyond any real use and small enough for what stores them: 64-bit
integer columns, Redis's doubles (exact to 2**53), and the ledger's signed 64-bit micro-credits —
the dearest request the bounds allow (10^8 tokens at 10,000 USD per million at 10^5 credits per USD
with a markup of +1000%) comes to 1.1 × 10^18 micro-credits, under the 9.2 × 10^18 a balance holds.

docs/limits.md's "What an operator may set" lists them; its table is this module's.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from domain.ledger_errors import InvalidAmount
from domain.money import MAX_CREDITS_AMOUNT, MICROS_PER_CREDIT


class OutOfBounds(InvalidAmount):
    """A number an operator set is outside its range; nothing was recorded (a ledger's refusal, so the
    admin API answers it with 400 and the CLI with its one-line error)."""


@dataclass(frozen=True, slots=True)
class Bound:
    """The range of one quantity: ``low`` to ``high`` (``low`` itself excluded if not ``low_included``),
    in steps of ``step`` if given (``Decimal("0.01")``: at most two decimals)."""

    what: str  # the quantity, as a message names it
    low: int | Decimal
    high: int | Decimal
    unit: str = ""
    low_included: bool = True
    step: Decimal | None = None
    whole: bool = False  # a whole number (an int, never a bool)

    def problem(self, value: object) -> str | None:
        """What is wrong with ``value`` for this quantity (``rpm (requests per minute) must be at most
        1,000,000,000 per minute, got 1180591620717411303424``), or None if it is in range."""
        wrong = self.violation(value)
        shown = value if isinstance(value, int | Decimal) and not isinstance(value, bool) else repr(value)
        return None if wrong is None else f"{self.what} {wrong}, got {shown}"

    def violation(self, value: object) -> str | None:
        """What ``value`` breaks, said of it (``must be at most 1,000 USD per call``), or None."""
        if isinstance(value, bool) or not isinstance(value, int | Decimal):
            return f"must be {'a whole number' if self.whole else 'a number'}"
        if self.whole and isinstance(value, Decimal):
            return f"must be {'a whole number' if self.whole else 'a number'}"
        if isinstance(value, Decimal) and not value.is_finite():
            return "must be a finite number"
        unit = f" {self.unit}" if self.unit else ""
        if value > self.high:
            return f"must be at most {_shown(self.high)}{unit}"
        if value < self.low or (value == self.low and not self.low_included):
            if self.low == 0:
                return "must not be negative" if self.low_included else "must be greater than 0"
            return f"must be at least {_shown(self.low)}{unit}"
        if self.step is not None and Decimal(value) != Decimal(value).quantize(self.step):
            return f"may have at most {-int(self.step.as_tuple().exponent)} decimals"
        return None

    def check(self, value: object) -> None:
        """Refuse ``value`` (``OutOfBounds``) unless it is in range."""
        problem = self.problem(value)
        if problem is not None:
            raise OutOfBounds(problem)

    def described(self) -> str:
        """The range in words, as the docs' table says it: ``1 to 1,000,000,000 per minute``."""
        unit = f" {self.unit}" if self.unit else ""
        low = _shown(self.low) if self.low_included else f"more than {_shown(self.low)}"
        return f"{low} to {_shown(self.high)}{unit}"


def _shown(value: int | Decimal) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value.normalize():,f}"


_MAX_MICROS = MAX_CREDITS_AMOUNT * MICROS_PER_CREDIT

# -- recorded in the ledger (the admin API and the CLI) --------------------------------------------
#: A team's or a key's requests per minute (0, or none given: no limit).
RPM = Bound("rpm (requests per minute)", 1, 10**9, "per minute", whole=True)
#: A team's or a key's tokens per minute (0, or none given: no limit).
TPM = Bound("tpm (tokens per minute)", 1, 10**12, "per minute", whole=True)
#: One amount of credits an operator moves: a top-up, a new team's credits, an adjustment (either way).
AMOUNT = Bound("an amount", 1, _MAX_MICROS, "micro-credits", whole=True)
#: A key's or a team's budget per period (0: nothing may be spent).
BUDGET = Bound("a budget", 0, _MAX_MICROS, "micro-credits", whole=True)
#: An alert when a budget's spend reaches this share of it.
BUDGET_ALERT_PERCENT = Bound(
    "a budget alert", Decimal(0), Decimal(1000), "percent", low_included=False, step=Decimal("0.01")
)
#: An alert when the team's balance falls under this.
BALANCE_ALERT = Bound("a balance alert", 1, _MAX_MICROS, "micro-credits", whole=True)
#: A team's markup (positive) or discount (negative) on the price list.
PRICE_ADJUSTMENT_PERCENT = Bound("a price adjustment", Decimal(-100), Decimal(1000), "percent", step=Decimal("0.0001"))

#: How far a drill's ledger clock runs ahead of the wall clock (``TOLLGATE_CLOCK_OFFSET``): never
#: behind it, and at most 31 days, enough to reach the end of any budget's period.
CLOCK_OFFSET = Bound("a clock offset", Decimal(0), Decimal(31 * 86400), "seconds")

# -- set in the configuration file (and price list files) ------------------------------------------
#: Any rate of a price: USD per million tokens of a kind.
PRICE_RATE = Bound("a price", Decimal(0), Decimal(10_000), "USD per million tokens")
#: A provider-run tool's fee per call.
TOOL_FEE = Bound("a tool fee", Decimal(0), Decimal(1_000), "USD per call")
#: A generated image's price.
IMAGE_PRICE = Bound("an image price", Decimal(0), Decimal(1_000), "USD per image")
#: Credits one USD buys.
CREDITS_PER_USD = Bound("credits_per_usd", Decimal(0), Decimal(100_000), "credits", low_included=False)
#: A model's context window, its output limit, a long-context threshold.
TOKENS = Bound("a number of tokens", 1, 10**8, "tokens", whole=True)
#: Streams open at once, per key or per gateway process.
STREAMS = Bound("a number of streams", 1, 10**6, "streams", whole=True)
#: Failed key attempts a client address may make a minute (0: no limit).
KEY_FAILURES = Bound("max_key_failures_per_minute", 0, 10**9, "per minute", whole=True)
#: Connections a gateway process keeps to PostgreSQL.
CONNECTIONS = Bound("database_pool_size", 1, 1_000, "connections", whole=True)
#: Any duration setting (a hold's timeout, an Idempotency-Key's life, a deadline): at most a year,
#: beyond which a timer's arithmetic overflows long before anyone could wait for it.
SECONDS = Bound("a duration", Decimal(0), Decimal(366 * 86400), "seconds")
