"""Billing a request: the hold before it goes upstream, the charge after it is answered.

The arithmetic lives in the domain (pricing and the ``TeamLedger`` commands); this module only
decides *what* to ask the ledger and turns its answers into the ``usage`` fields clients read.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.errors import InsufficientCreditsError, ServiceUnavailable
from app.keys import Principal
from app.ledger_writer import LedgerUnavailable, LedgerWriter
from domain.ledger import InsufficientCredits, TeamLedger
from domain.money import credits_from_micros, format_credits, usd_from_micros
from domain.pricing import TokenUsage, worst_case_in_micros
from domain.settings import Model, Settings

#: Tokens a chat message costs beyond its text (role and separators), per OpenAI's accounting.
MESSAGE_OVERHEAD_TOKENS = 4
REPLY_PRIMING_TOKENS = 3


#: A bound on what one image costs in prompt tokens (OpenAI high detail and Anthropic both stay
#: well below it); images are counted by this, not by the size of their base64 data.
IMAGE_TOKEN_BOUND = 8_000
_IMAGE_PARTS = frozenset({"image_url", "image", "input_image"})
_PROMPT_FIELDS = ("system", "instructions", "messages", "input", "tools")


def prompt_token_bound(body: dict[str, Any]) -> int:
    """An upper bound on the prompt's tokens, without a tokenizer, for any of the three protocols.

    Byte-level BPE tokenizers never make a token out of less than one byte, so the UTF-8 size of
    every string in the prompt fields (plus per-message overhead, and a fixed bound per image)
    bounds the real count. It is deliberately pessimistic: it sizes holds, which are released in
    full after the request.
    """
    turns = sum(len(body[f]) for f in ("messages", "input") if isinstance(body.get(f), list))
    size = sum(_utf8_size(body.get(f)) for f in _PROMPT_FIELDS)
    return size + MESSAGE_OVERHEAD_TOKENS * max(turns, 1) + REPLY_PRIMING_TOKENS


def _utf8_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, dict):
        if value.get("type") in _IMAGE_PARTS:
            return IMAGE_TOKEN_BOUND
        return sum(_utf8_size(v) for v in value.values())
    if isinstance(value, list):
        return sum(_utf8_size(v) for v in value)
    return 0


def estimated_usage(prompt_bound: int, delivered_bytes: int) -> TokenUsage:
    """Usage when the upstream reported none: the prompt bound, and one token per byte delivered."""
    return TokenUsage(input_tokens=prompt_bound, output_tokens=delivered_bytes)


@dataclass(frozen=True, slots=True)
class Charge:
    """What a served request cost, and what the team has left right after it."""

    credits: Decimal
    usd: Decimal
    remaining_credits: Decimal

    def usage_fields(self) -> dict[str, Any]:
        return {"cost": {"usd": self.usd, "credits": self.credits}, "remaining": {"credits": self.remaining_credits}}


@dataclass(frozen=True, slots=True)
class RequestBill:
    """One request's billing context: who pays, for which model, under which request id."""

    principal: Principal
    model: Model
    request_id: str
    endpoint: str


class Billing:
    def __init__(self, writer: LedgerWriter, settings: Settings) -> None:
        self._writer = writer
        self._credits_per_usd = settings.credits_per_usd

    def worst_case(self, model: Model, prompt_bound: int, max_output_tokens: int) -> int:
        return worst_case_in_micros(prompt_bound, max_output_tokens, model.price, self._credits_per_usd)

    async def hold(self, bill: RequestBill, amount: int) -> None:
        """Reserve ``amount`` before going upstream (402 if the team cannot afford it)."""
        p = bill.principal
        try:
            await self._writer.run_on_team(
                p.team_id,
                p.team_name,
                lambda team: team.place_hold(bill.request_id, amount, p.key_id, bill.model.id, bill.endpoint),
            )
        except InsufficientCredits as exc:
            raise InsufficientCreditsError(
                f"Insufficient credits: this request can cost up to {format_credits(exc.needed)} credits "
                f"but team '{p.team_name}' has {format_credits(exc.available)} available. "
                "Add credits or lower max_tokens."
            ) from None
        except LedgerUnavailable as exc:
            raise ServiceUnavailable(f"The billing ledger is unavailable: {exc}") from None

    def _submit_charge(self, bill: RequestBill, usage: TokenUsage) -> Future[TeamLedger.Charged]:
        p = bill.principal
        return self._writer.on_team(
            p.team_id,
            p.team_name,
            lambda team: team.charge(
                bill.request_id,
                usage,
                bill.model.price,
                self._credits_per_usd,
                key_id=p.key_id,
                model=bill.model.id,
                endpoint=bill.endpoint,
            ),
        )

    async def charge(self, bill: RequestBill, usage: TokenUsage) -> Charge:
        """Charge the actual cost and close the hold; returns once the charge is durable."""
        try:
            event = await asyncio.wrap_future(self._submit_charge(bill, usage))
        except LedgerUnavailable as exc:
            raise ServiceUnavailable(f"The billing ledger is unavailable: {exc}") from None
        return Charge(
            credits=credits_from_micros(event.charged),
            usd=usd_from_micros(event.charged, self._credits_per_usd),
            remaining_credits=credits_from_micros(event.balance_after),
        )

    def charge_soon(self, bill: RequestBill, usage: TokenUsage) -> None:
        """Queue a charge without waiting (for streams the client abandoned)."""
        self._submit_charge(bill, usage)

    def release_soon(self, bill: RequestBill, reason: str) -> Future[int]:
        """Queue the hold's release (nothing was delivered); awaitable via ``asyncio.wrap_future``."""
        p = bill.principal
        return self._writer.on_team(p.team_id, p.team_name, lambda team: team.release_hold(bill.request_id, reason))

    async def release(self, bill: RequestBill, reason: str) -> None:
        try:
            await asyncio.wrap_future(self.release_soon(bill, reason))
        except LedgerUnavailable:
            pass  # the hold stays open and visible; nothing was charged
