"""Pricing: what a request costs, from its usage and a model's price.

Prices are USD per million tokens (as providers publish them). Because a price per *million*
tokens times a number of tokens, times credits-per-USD, times a million micro-credits per credit
is just ``tokens × price × credits_per_usd`` micro-credits, costs are exact ``Decimal``s until the
one rounding rule in :mod:`domain.money` turns a request's total into whole micro-credits.

What providers bill, and how it is priced here (docs/billing.md, docs/prices.md):

- **Token kinds**: prompt tokens neither written to nor read from a cache (``input``), output tokens
  (reasoning included), cache writes of the default 5-minute lifetime (``cache_create``), 1-hour
  cache writes (``cache_write_1h``; unset, they are billed as ``cache_create``) and cache hits.
- **Long context**: above ``long_context.threshold`` prompt tokens the *whole* request — output and
  cache tokens included — is priced at the long-context rates, not only the tokens past the threshold.
- **Service tiers**: a request is priced at the tier the upstream reports it was served at
  (``flex``, ``priority``), not the one it asked for; a tier without a price of its own is the base.
- **Tool fees**: a provider-run tool (web search) costs a fee per call the upstream reports making;
  declaring the tool costs nothing.

A charge records the rates it was billed at (:meth:`Price.applied`: the tier's, or the long-context
ones) and why (``basis``), so an auditor reads the price of every charge off the charge itself.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, NotRequired, TypedDict

from domain.money import round_up_to_micros
from domain.usage import TokenUsage

#: The token kinds a request is billed on, in the order a breakdown lists them, with the usage
#: field that counts each and the price field that prices it.
TOKEN_KINDS = (
    ("input", "input_tokens", "input"),
    ("output", "output_tokens", "output"),
    ("cache_write", "cache_write_tokens", "cache_create"),
    ("cache_write_1h", "cache_write_1h_tokens", "write_1h"),
    ("cache_hit", "cache_hit_tokens", "cache_hit"),
    ("image_input", "image_input_tokens", "image_input_rate"),
    ("image_output", "image_output_tokens", "image_output_rate"),
    ("audio_input", "audio_input_tokens", "audio_input_rate"),
)
#: The token rates every price has a place for (``Price``'s first four fields), by their names in a
#: configuration's ``pricing`` and a price record; a model may leave out those its endpoints never bill.
CHAT_RATES = ("input", "output", "cache_create", "cache_hit")
#: The rates a price may leave unset, stored only when set (as decimal strings, like every rate).
OPTIONAL_RATES = (
    "cache_write_1h",
    "batch_discount",
    "image_input",
    "image_output",
    "audio_second",
    "input_characters",
    "audio_input",
)
#: Tiers that are the base price whatever the configuration says (how OpenAI and Anthropic name it).
BASE_TIERS = frozenset({"", "default", "standard", "auto", "standard_only"})
_HUNDRED = Decimal(100)


class PriceRecord(TypedDict):
    """A price as events store it (``Price.as_record``: a charge's rates, a price list entry): every
    rate a decimal string, so every digit is kept; what is unset is left out (a token rate too, for a
    model that serves no endpoint billing it: an embeddings model has no output price)."""

    input: NotRequired[str]
    output: NotRequired[str]
    cache_create: NotRequired[str]
    cache_hit: NotRequired[str]
    cache_write_1h: NotRequired[str]
    long_context: NotRequired[LongContextRecord]
    service_tiers: NotRequired[dict[str, PriceRecord]]
    tool_fees: NotRequired[dict[str, str]]
    batch_discount: NotRequired[str]
    batch: NotRequired[PriceRecord]
    image_input: NotRequired[str]
    image_output: NotRequired[str]
    images: NotRequired[dict[str, str]]
    audio_second: NotRequired[str]
    input_characters: NotRequired[str]
    audio_input: NotRequired[str]


class LongContextRecord(PriceRecord):
    """The long-context rates, and above how many prompt tokens they apply."""

    threshold: int


@dataclass(frozen=True, slots=True)
class LongContext:
    """Above ``threshold`` prompt tokens, the whole request is priced at ``price``."""

    threshold: int
    price: Price


@dataclass(frozen=True, slots=True)
class Price:
    """A model's price, in USD per million tokens of each kind (and per call of each tool).

    ``service_tiers`` and ``long_context`` hold whole rate tables of their own; a table inside them
    has none of its own tool fees (those are the model's, whatever the tier), and a tier's table may
    have its own long-context rates.

    ``unpriced`` names the token rates (of ``CHAT_RATES``) the model has no price for, held as 0 here:
    a model serving only endpoints that never bill them (an embeddings model has no output price).
    The configuration check (``domain/endpoint_prices.py``) refuses a model whose endpoints bill a
    quantity it has no price for, so a 0 held for an unpriced rate is never charged by accident; the
    record and the model list leave it out rather than show a price of 0."""

    input: Decimal
    output: Decimal
    cache_create: Decimal
    cache_hit: Decimal
    cache_write_1h: Decimal | None = None
    long_context: LongContext | None = None
    service_tiers: Mapping[str, Price] = field(default_factory=dict)
    tool_fees: Mapping[str, Decimal] = field(default_factory=dict)
    #: A batch line's price as a fraction off every token rate (``0.5``: half price); or
    batch_discount: Decimal | None = None
    #: the explicit rates a batch line is billed at. Neither: a batch line costs what a request does.
    batch: Price | None = None

    def for_batch(self) -> tuple[Price, str]:
        """The price a line of a batch (``/v1/batches``, Anthropic's message batches) is billed at, and
        why (``batch`` for explicit rates, ``batch_discount:0.5``, ``batch:none`` when the model has no
        batch price and a line costs what a request does). The discount applies to every token rate of
        every table (tiers, long context); tool fees are the model's, undiscounted."""
        if self.batch is not None:
            return replace(self.batch, tool_fees=self.tool_fees), "batch"
        if self.batch_discount is None:
            return self._without_batch(), "batch:none"
        return self._scaled(1 - self.batch_discount), f"batch_discount:{self.batch_discount}"

    def applied_to(self, usage: TokenUsage, *, batch: bool) -> tuple[Price, str]:
        """:meth:`applied`, or for a batch's line the rates its batch price applies to ``usage`` and
        why (``batch_discount:0.5``, ``batch+long_context``): what a charge records, and what
        ``ledger verify`` checks it against."""
        if not batch:
            return self.applied(usage)
        table, why = self.for_batch()
        applied, basis = table.applied(usage)
        return applied, batch_basis(why, basis)

    def _without_batch(self) -> Price:
        return replace(self, batch_discount=None, batch=None)

    def _scaled(self, factor: Decimal) -> Price:
        def scaled(table: Price) -> Price:
            return replace(
                table,
                input=table.input * factor,
                output=table.output * factor,
                cache_create=table.cache_create * factor,
                cache_hit=table.cache_hit * factor,
                cache_write_1h=None if table.cache_write_1h is None else table.cache_write_1h * factor,
                long_context=None
                if table.long_context is None
                else LongContext(table.long_context.threshold, scaled(table.long_context.price)),
                service_tiers={name: scaled(t) for name, t in table.service_tiers.items()},
                batch_discount=None,
                batch=None,
            )

        return scaled(self)

    unpriced: frozenset[str] = frozenset()
    #: USD per million image tokens read (input images) and written (generated images), for image
    #: models that report token usage (unset: the model bills no image tokens).
    image_input: Decimal | None = None
    image_output: Decimal | None = None
    #: USD per generated image, by ``SIZE/QUALITY`` (``domain/image_pricing.py``).
    images: Mapping[str, Decimal] = field(default_factory=dict)

    @property
    def image_input_rate(self) -> Decimal:
        return self.image_input if self.image_input is not None else Decimal(0)

    @property
    def image_output_rate(self) -> Decimal:
        return self.image_output if self.image_output is not None else Decimal(0)

    #: USD per second of audio transcribed or translated (unset: the model bills no audio seconds).
    audio_second: Decimal | None = None
    #: USD per million characters of text turned into speech (unset: the model bills no characters).
    input_characters: Decimal | None = None
    #: USD per million audio tokens a transcription model reads (unset: the model bills no audio tokens).
    audio_input: Decimal | None = None

    @property
    def audio_input_rate(self) -> Decimal:
        """The audio token rate; a model without one never bills audio tokens (never free by accident)."""
        if self.audio_input is None:
            raise ValueError("no price for an audio input token")
        return self.audio_input

    @property
    def write_1h(self) -> Decimal:
        """What a 1-hour cache write token costs (the 5-minute rate when no rate of its own is set)."""
        return self.cache_write_1h if self.cache_write_1h is not None else self.cache_create

    @property
    def highest_input(self) -> Decimal:
        """The dearest way a prompt token can be billed (plain, either cache write, or cache hit)."""
        return max(self.input, self.cache_create, self.write_1h, self.cache_hit)

    def applied(self, usage: TokenUsage) -> tuple[Price, str]:
        """The rates ``usage`` is billed at, with the model's tool fees, and why: ``base``, the tier
        the upstream reported (``tier:flex``), and ``long_context`` when the prompt passed the threshold."""
        if not self.service_tiers and self.long_context is None and self.batch_discount is None and self.batch is None:
            return self, "base"  # one table: the price is its own (the common case, on every charge)
        table, basis = self, "base"
        tier = self.service_tiers.get(usage.service_tier) if usage.service_tier not in BASE_TIERS else None
        if tier is not None:
            table, basis = tier, f"tier:{usage.service_tier}"
        if table.long_context is not None and usage.prompt_tokens > table.long_context.threshold:
            table = table.long_context.price
            basis = "long_context" if basis == "base" else f"{basis}+long_context"
        return Price(
            table.input,
            table.output,
            table.cache_create,
            table.cache_hit,
            table.cache_write_1h,
            tool_fees=self.tool_fees,
            image_input=self.image_input,
            image_output=self.image_output,
            images=self.images,
            unpriced=table.unpriced,
            audio_second=self.audio_second,
            input_characters=self.input_characters,
            audio_input=self.audio_input,
        ), basis

    def tables(self, prompt_bound: int, tiers: Collection[str] | None = None) -> list[Price]:
        """The rate tables a request whose prompt is at most ``prompt_bound`` tokens may be billed at:
        the base and the named ``tiers`` (every configured tier when ``None``), and the long-context
        table of each whose threshold the prompt may pass."""
        chosen = [self, *(t for name, t in self.service_tiers.items() if tiers is None or name in tiers)]
        return [
            *chosen,
            *(
                t.long_context.price
                for t in chosen
                if t.long_context is not None and prompt_bound > t.long_context.threshold
            ),
        ]

    def as_record(self) -> PriceRecord:
        """The price as stored in events (strings keep every digit; what is unset is left out)."""
        record: PriceRecord = {}
        for name in CHAT_RATES:
            if name not in self.unpriced:
                record[name] = str(getattr(self, name))  # type: ignore[literal-required]
        for name in OPTIONAL_RATES:
            rate = getattr(self, name)
            if rate is not None:
                record[name] = str(rate)  # type: ignore[literal-required]
        if self.long_context is not None:
            record["long_context"] = {"threshold": self.long_context.threshold, **self.long_context.price.as_record()}
        if self.service_tiers:
            record["service_tiers"] = {name: tier.as_record() for name, tier in sorted(self.service_tiers.items())}
        if self.tool_fees:
            record["tool_fees"] = {name: str(fee) for name, fee in sorted(self.tool_fees.items())}
        if self.batch is not None:
            record["batch"] = self.batch.as_record()
        if self.images:
            record["images"] = {name: str(each) for name, each in sorted(self.images.items())}
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Price:
        long_context = record.get("long_context")
        return cls(
            Decimal(record.get("input", 0)),
            Decimal(record.get("output", 0)),
            Decimal(record.get("cache_create", 0)),
            Decimal(record.get("cache_hit", 0)),
            cache_write_1h=Decimal(record["cache_write_1h"]) if "cache_write_1h" in record else None,
            long_context=LongContext(int(long_context["threshold"]), cls.from_record(long_context))
            if long_context
            else None,
            service_tiers={name: cls.from_record(tier) for name, tier in (record.get("service_tiers") or {}).items()},
            tool_fees={name: Decimal(fee) for name, fee in (record.get("tool_fees") or {}).items()},
            batch_discount=Decimal(record["batch_discount"]) if "batch_discount" in record else None,
            batch=cls.from_record(record["batch"]) if record.get("batch") else None,
            image_input=Decimal(record["image_input"]) if "image_input" in record else None,
            image_output=Decimal(record["image_output"]) if "image_output" in record else None,
            images={name: Decimal(each) for name, each in (record.get("images") or {}).items()},
            unpriced=frozenset(name for name in CHAT_RATES if name not in record),
            audio_second=Decimal(record["audio_second"]) if "audio_second" in record else None,
            input_characters=Decimal(record["input_characters"]) if "input_characters" in record else None,
            audio_input=Decimal(record["audio_input"]) if "audio_input" in record else None,
        )


def batch_basis(batch: str, basis: str) -> str:
    """A batch line's basis: its batch price's, and the table's within it when not the base one."""
    return batch if basis == "base" else f"{batch}+{basis}"


@dataclass(frozen=True, slots=True)
class Cost:
    """What a request costs: ``micros``, the exact total rounded up once, and ``parts``, the exact
    micro-credits of each dimension it was billed on (token kinds, ``tool:NAME`` fees, and the
    team's ``adjustment``), which add up to the total before rounding."""

    micros: int
    parts: dict[str, Decimal]
    applied: Price
    basis: str


def price_usage(usage: TokenUsage, price: Price, credits_per_usd: Decimal, adjustment: Decimal = Decimal(0)) -> Cost:
    """The cost of ``usage`` at ``price``: at the rates it applies to the usage (tier, long context),
    plus the fee of every tool call reported, then the team's price ``adjustment`` (a percentage:
    ``-10`` is a 10 % discount), rounded up once."""
    applied, basis = price.applied(usage)
    parts: dict[str, Decimal] = {}
    for dimension, counted, priced in TOKEN_KINDS:
        tokens = getattr(usage, counted)
        if tokens:
            parts[dimension] = tokens * getattr(applied, priced) * credits_per_usd
    for tool, calls in usage.tool_calls:
        fee = applied.tool_fees.get(tool)
        if fee:  # a tool without a fee in the price is free: the tokens it used are billed as tokens
            parts[f"tool:{tool}"] = calls * fee * 1_000_000 * credits_per_usd
    for kind, count in usage.images:
        each = applied.images.get(kind)
        if each is None:  # never free by accident: an image is billed at a price of its own or not at all
            raise ValueError(f"no price for a {kind} image")
        parts[f"image:{kind}"] = count * each * 1_000_000 * credits_per_usd
    parts.update(_media_parts(usage, applied, credits_per_usd))
    if adjustment:
        parts["adjustment"] = sum(parts.values(), Decimal(0)) * adjustment / _HUNDRED
    return Cost(round_up_to_micros(sum(parts.values(), Decimal(0))), parts, applied, basis)


def _media_parts(usage: TokenUsage, price: Price, credits_per_usd: Decimal) -> dict[str, Decimal]:
    """The audio dimensions of a charge: seconds transcribed (USD per second) and characters spoken
    (USD per million). A quantity without a price raises: never free by accident (the configuration
    check refuses a model whose endpoints bill one it has no price for)."""
    parts: dict[str, Decimal] = {}
    if usage.audio_seconds:
        if price.audio_second is None:
            raise ValueError("no price for a second of audio")
        parts["audio_seconds"] = usage.audio_seconds * price.audio_second * 1_000_000 * credits_per_usd
    if usage.input_characters:
        if price.input_characters is None:
            raise ValueError("no price for characters of speech")
        parts["input_characters"] = usage.input_characters * price.input_characters * credits_per_usd
    return parts


def cost_in_micros(usage: TokenUsage, price: Price, credits_per_usd: Decimal) -> int:
    """The cost of ``usage`` at ``price``, in whole micro-credits (rounded up once)."""
    return price_usage(usage, price, credits_per_usd).micros


@dataclass(frozen=True, slots=True)
class Exposure:
    """What a request could trigger beyond its tokens, for its worst case: the service tiers it may
    be served at (``None``: any the model has) and the most calls of each provider-run tool it
    declared."""

    tiers: frozenset[str] | None = None
    tool_calls: Mapping[str, int] = field(default_factory=dict)

    def widest(self, other: Exposure) -> Exposure:
        """What a request exposed as either this or ``other`` could trigger (one request planned for
        deployments of two wires): every tier either may be served at, the most calls of each tool."""
        tiers = None if self.tiers is None or other.tiers is None else self.tiers | other.tiers
        calls = dict(self.tool_calls)
        for tool, most in other.tool_calls.items():
            calls[tool] = max(most, calls.get(tool, 0))
        return Exposure(tiers, calls)


_ANYTHING = Exposure()


def worst_case_in_micros(
    prompt_token_bound: int,
    max_output_tokens: int,
    price: Price,
    credits_per_usd: Decimal,
    exposure: Exposure = _ANYTHING,
    adjustment: Decimal = Decimal(0),
) -> int:
    """The most a request can cost: every prompt token at the dearest input rate and every allowed
    output token at the output rate, of the dearest table it may be billed at (any tier it may be
    served at, and the long-context rates if its prompt may pass the threshold), plus the fees of the
    most tool calls it may make. This is what a hold reserves."""
    return round_up_to_micros(
        _worst_exact(prompt_token_bound, max_output_tokens, price, credits_per_usd, exposure, adjustment)
    )


def _worst_exact(
    prompt: int, output: int, price: Price, credits_per_usd: Decimal, exposure: Exposure, adjustment: Decimal
) -> Decimal:
    if not price.service_tiers and price.long_context is None and not exposure.tool_calls and not adjustment:
        return (prompt * price.highest_input + output * price.output) * credits_per_usd  # one table: every hold
    tokens = max(prompt * t.highest_input + output * t.output for t in price.tables(prompt, exposure.tiers))
    fees = sum(
        (calls * price.tool_fees.get(tool, Decimal(0)) * 1_000_000 for tool, calls in exposure.tool_calls.items()),
        Decimal(0),
    )
    exact = (tokens + fees) * credits_per_usd
    return exact + exact * adjustment / _HUNDRED if adjustment else exact


@dataclass(frozen=True, slots=True)
class Quote:
    """What a request is priced at now, for its hold: the model's price in force, the credit rate
    and the team's price adjustment (a percentage). Endpoints other than generation size their
    holds with it (``Quote.worst_case`` for token-priced ones)."""

    price: Price
    credits_per_usd: Decimal
    adjustment: Decimal = Decimal(0)

    def worst_case(self, prompt_tokens: int, output_tokens: int = 0, exposure: Exposure | None = None) -> int:
        """The most ``prompt_tokens`` and ``output_tokens`` can cost, in micro-credits (no service
        tier, unless ``exposure`` says which may serve it)."""
        return worst_case_in_micros(
            prompt_tokens,
            output_tokens,
            self.price,
            self.credits_per_usd,
            exposure or _NO_TIER,
            self.adjustment,
        )

    def affordable_prompt(self, available: int, ceiling: int) -> int:
        """The most prompt tokens (up to ``ceiling``) whose worst case ``available`` covers."""
        return affordable_output_tokens(available, ceiling, self.worst_case)


#: A request no service tier may serve (an embedding: only the base price applies).
_NO_TIER = Exposure(tiers=frozenset())


def affordable_output_tokens(available: int, ceiling: int, worst_case: Callable[[int], int]) -> int:
    """The largest output allowance, at most ``ceiling``, whose worst case ``available`` covers
    (0 if not even the prompt is covered): what a refusal for credits tells the client it can ask for.
    ``worst_case``: a request's worst case for an output allowance (``worst_case_in_micros`` with
    its prompt, price and exposure), which grows with the allowance."""

    def fits(output: int) -> bool:
        return worst_case(output) <= available

    if not fits(0):
        return 0
    low, high = 0, ceiling  # fits(low) holds; the worst case grows with the output allowance
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low
