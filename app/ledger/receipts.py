"""What a charge tells the client: its cost, what the cost is made of, and the balance left.

Every answer's ``usage`` gains ``cost`` (``usd``, ``credits``; ``breakdown``: each dimension billed
with its count and its exact cost, before the total was rounded up once; ``basis``: the rates it was
billed at; ``price_ref``: the price list entry they came from) and ``remaining.credits``. The parts
come from the charge command itself (``TeamLedger.charge_priced``), computed once on the writer
thread; a charge read back from the ledger (a request charged before) has them priced again from
what its event recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from app.store.log_append import LoggedLeaf
from app.store.read_models import ChargeRecord
from domain.ledger import TeamLedger
from domain.money import credits_from_exact, credits_from_micros, usd_from_micros
from domain.pricing import TOKEN_KINDS, Cost, Price, price_usage
from domain.transparency.keys import NoteSigner
from domain.transparency.receipt import Receipt, sign_receipt
from domain.usage import TokenUsage

#: A breakdown's token dimension → the usage field that counts it.
_COUNTED = {dimension: counted for dimension, counted, _ in TOKEN_KINDS}
#: A breakdown's audio dimension (the usage field that counts it) → what its count is called.
_MEDIA = {"audio_seconds": "seconds", "input_characters": "characters"}


@dataclass(frozen=True, slots=True)
class Charge:
    """What a served request cost, what each dimension of it came to, and what the team has left
    right after it."""

    credits: Decimal
    usd: Decimal
    remaining_credits: Decimal
    #: Each dimension billed (``input``, ``output``, ``cache_write``, ``cache_write_1h``,
    #: ``cache_hit``, ``image_input``, ``image_output``, ``tool:web_search``, ``image:1024x1024/hd``,
    #: ``adjustment``): what was counted and its exact cost.
    breakdown: dict[str, dict[str, Any]] = field(default_factory=dict)
    basis: str = ""  # the rates it was billed at: base, tier:NAME, long_context
    price_ref: str = ""  # the price list entry they come from
    #: What the key's budget has left this period (None: the key has no budget).
    key_budget_credits: Decimal | None = None
    #: The charge's signed receipt (``domain/transparency/receipt.py``; "": the gateway signs none).
    receipt: str = ""

    @classmethod
    def of(cls, event: TeamLedger.Charged | ChargeRecord, credits_per_usd: Decimal, cost: Cost | None = None) -> Charge:
        breakdown: dict[str, dict[str, Any]] = {}
        basis = ref = ""
        budget_left = None
        if isinstance(event, TeamLedger.Charged):
            breakdown = cost_breakdown(event, credits_per_usd, cost)
            basis, ref = event.basis, event.price_ref
            if event.key_budget_left is not None:
                budget_left = credits_from_micros(event.key_budget_left)
        return cls(
            credits_from_micros(event.charged),
            usd_from_micros(event.charged, credits_per_usd),
            credits_from_micros(event.balance_after),
            breakdown,
            basis,
            ref,
            budget_left,
        )

    def usage_fields(self) -> dict[str, Any]:
        cost: dict[str, Any] = {"usd": self.usd, "credits": self.credits}
        if self.breakdown:
            cost["breakdown"] = self.breakdown
        if self.basis:
            cost["basis"] = self.basis
        if self.price_ref:
            cost["price_ref"] = self.price_ref
        remaining: dict[str, Any] = {"credits": self.remaining_credits}
        if self.key_budget_credits is not None:
            remaining["key_budget_credits"] = self.key_budget_credits
        fields: dict[str, Any] = {"cost": cost, "remaining": remaining}
        if self.receipt:
            fields["receipt"] = self.receipt
        return fields


def signed_receipt(signer: NoteSigner, team: str, event: TeamLedger.Charged, leaf: LoggedLeaf) -> str:
    """The receipt of a charge whose event is ``leaf`` of the transparency log, signed with the log's key."""
    receipt = Receipt(
        signer.name,
        event.request_id,
        team,
        event.originator_version,
        event.charged,
        event.balance_after,
        leaf.index,
        leaf.leaf_hash,
    )
    return sign_receipt(receipt, signer)


def cost_breakdown(event: TeamLedger.Charged, credits_per_usd: Decimal, cost: Cost | None = None) -> dict[str, Any]:
    """A charge's cost by dimension: each dimension's count (tokens, calls, or the adjustment's
    percent) and its exact cost in credits and USD (the parts add up to the exact total, not to the
    rounded one). ``cost``: the parts as the charge command computed them (else priced again)."""
    if cost is None:
        cost = price_usage(
            TokenUsage.from_record(event.usage),
            Price.from_record(event.price),
            Decimal(event.credits_per_usd),
            Decimal(event.adjustment or 0),
        )
    usage, calls, images = event.usage, event.usage.get("tool_calls") or {}, event.usage.get("images") or {}
    out: dict[str, Any] = {}
    for dimension, part in cost.parts.items():
        if dimension in _COUNTED:
            count: tuple[str, Any] = ("tokens", usage.get(_COUNTED[dimension], 0))
        elif dimension == "adjustment":
            count = ("percent", Decimal(event.adjustment))
        elif dimension.startswith("image:"):
            count = ("images", images.get(dimension.removeprefix("image:"), 0))
        elif dimension in _MEDIA:
            count = (_MEDIA[dimension], usage.get(dimension, 0))
        else:
            count = ("calls", calls.get(dimension.removeprefix("tool:"), 0))
        in_credits = credits_from_exact(part)
        out[dimension] = {count[0]: count[1], "credits": in_credits, "usd": in_credits / credits_per_usd}
    return out
