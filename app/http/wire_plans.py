"""A generation request planned for every wire its model's deployments speak, before the hold.

A model may be served by deployments of different wires (Claude on ``anthropic`` and on ``bedrock``
with ``api = "converse"``; GPT on ``openai`` and ``openai-responses``): failover before the first
byte then needs the request written for each. Everything that can refuse it happens here, before
any money is held: a wire that cannot take the request (a field its translation refuses) is left
out, and its deployments are not tried; only a request no wire can take is refused, with the first
wire's reason. The hold covers the dearest of them: the largest prompt count over the wires (each
counts its own framing), the widest exposure (tiers, provider-run tools).

A model of one wire, the common case, is planned once, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.errors import GatewayError
from app.http.prompt_size import measure_prompt
from app.tokens import Protocol
from app.translate.exchange import Exchange, plan
from app.translate.exposure import exposure_of
from domain.pricing import Exposure
from domain.settings import Model


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """What goes upstream for one request, and what its hold is sized by."""

    #: The first wire's exchange, with the others' as its ``alternatives``.
    exchange: Exchange
    #: The largest prompt count over the wires planned for.
    prompt_tokens: int


async def plan_for_each_wire(
    model: Model,
    wires: Sequence[str],
    protocol: Protocol,
    body: dict[str, Any],
    headers: Mapping[str, str],
    body_size: int,
) -> PlannedRequest:
    """The request planned for each of ``wires`` (the model's, in the order of its deployments) that
    can take it; raises the first wire's refusal if none can."""
    planned: list[Exchange] = []
    counts: list[int] = []
    refusal: GatewayError | None = None
    for wire in wires:
        prompt_tokens = await measure_prompt(model, wire, body, protocol, body_size)
        try:
            planned.append(plan(model, wire, protocol, body, headers, prompt_tokens))
        except GatewayError as exc:
            refusal = refusal or exc
            continue
        counts.append(prompt_tokens)
    if not planned:
        assert refusal is not None  # wires is never empty: every model has a deployment
        raise refusal
    first, *others = planned
    if others:
        first.alternatives = {other.wire: other for other in others}
        first.passthrough_wire = next((e.passthrough_wire for e in planned if e.passthrough_wire), None)
        first.dropped_tools = list(dict.fromkeys(name for e in planned for name in e.dropped_tools))
    return PlannedRequest(first, max(counts))


def widest_exposure(exchange: Exchange) -> Exposure:
    """What the request could trigger on whichever deployment serves it."""
    exposure = exposure_of(exchange.body, exchange.wire)
    for other in exchange.alternatives.values():
        exposure = exposure.widest(exposure_of(other.body, other.wire))
    return exposure
