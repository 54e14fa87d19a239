"""Rate limits per key and per team: admission before the hold, correction once usage is known.

A request is admitted against every limit that applies to it (its key's rpm/tpm, its team's
rpm/tpm) at once. Its tokens are estimated at admission — the prompt's count plus the output limit
the client asked for, if any — and corrected to the real total when the request is charged (or
to zero when nothing was delivered). Each answer carries OpenAI's ``x-ratelimit-*`` headers for
the binding limit of each kind; a refusal is a 429 ``rate_limit_error`` with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass, field
from typing import Protocol

from app.errors import RateLimited, ServiceUnavailable
from app.keys import Principal
from app.observability import metrics
from domain.rate_limits import REQUESTS, TOKENS, Decision, Limit

log = logging.getLogger("tollgate.ratelimit")


class LimiterStore(Protocol):
    shared: bool

    async def admit(self, limits: list[Limit]) -> Decision: ...
    async def correct(self, limits: list[Limit], delta: int) -> None: ...
    async def aclose(self) -> None: ...


@dataclass
class Admission:
    """What a request took from its limits: the headers to send, and its token estimate to correct."""

    headers: dict[str, str] = field(default_factory=dict)
    token_limits: list[Limit] = field(default_factory=list)
    estimated_tokens: int = 0


def limits_for(principal: Principal, tokens: int | None) -> list[Limit]:
    """The limits a request takes from: one request from each rpm, and ``tokens`` from each tpm
    (None: a request that uses no tokens, such as counting a prompt, takes from no tpm)."""
    scopes = (
        (f"key:{principal.key_id}", principal.key_rpm, principal.key_tpm),
        (f"team:{principal.team_id.hex}", principal.team_rpm, principal.team_tpm),
    )
    limits = []
    for scope, rpm, tpm in scopes:
        if rpm:
            limits.append(Limit(scope, REQUESTS, rpm, 1))
        if tpm and tokens is not None:
            limits.append(Limit(scope, TOKENS, tpm, tokens))
    return limits


def duration(seconds: float) -> str:
    """OpenAI's form for reset times: ``20ms``, ``1s``, ``6m0s``."""
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    whole = math.ceil(seconds)
    return f"{whole // 60}m{whole % 60}s" if whole >= 60 else f"{whole}s"


def rate_limit_headers(decision: Decision) -> dict[str, str]:
    headers = {}
    for kind in (REQUESTS, TOKENS):
        level = decision.binding(kind)
        if level is None:
            continue
        headers[f"x-ratelimit-limit-{kind}"] = str(level.limit.per_minute)
        headers[f"x-ratelimit-remaining-{kind}"] = str(max(0, math.floor(level.remaining)))
        headers[f"x-ratelimit-reset-{kind}"] = duration(level.reset_seconds)
    return headers


class RateLimiter:
    def __init__(self, store: LimiterStore) -> None:
        self._store = store
        self._pending: set[asyncio.Task[None]] = set()

    @property
    def shared(self) -> bool:
        return self._store.shared

    async def admit(self, principal: Principal, tokens: int | None) -> Admission:
        """Take one request and ``tokens`` from the caller's limits, or raise 429 (``tokens``
        None: one request only, from the rpm limits)."""
        limits = limits_for(principal, tokens)
        if not limits:
            return Admission()
        try:
            decision = await self._store.admit(limits)
        except Exception as exc:  # noqa: BLE001 - the shared store is down: refuse rather than run unlimited
            log.error("rate-limit store unavailable: %s", exc)
            raise ServiceUnavailable(
                "Rate limits cannot be checked right now; retry shortly.", headers={"retry-after": "1"}
            ) from None
        headers = rate_limit_headers(decision)
        if not decision.admitted:
            raise _refusal(decision, headers)
        return Admission(headers, [limit for limit in limits if limit.kind == TOKENS], tokens or 0)

    def correct_soon(self, admission: Admission | None, actual_tokens: int) -> None:
        """Replace the admission's token estimate by what was used, without making the caller wait."""
        if admission is None or not admission.token_limits or actual_tokens == admission.estimated_tokens:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # settled from a finaliser outside the loop: the estimate stands
            return
        task = loop.create_task(self._correct(admission.token_limits, actual_tokens - admission.estimated_tokens))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _correct(self, limits: list[Limit], delta: int) -> None:
        try:
            await self._store.correct(limits, delta)
        except Exception as exc:  # noqa: BLE001 - a correction that fails is logged; the request it follows is done
            log.warning("could not correct a token estimate by %d: %s", delta, exc)

    async def aclose(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        await self._store.aclose()


def _refusal(decision: Decision, headers: dict[str, str]) -> RateLimited:
    short = [level for level in decision.levels if level.remaining < level.limit.cost]
    level = max(short, key=lambda level: level.wait_for(level.limit.cost))
    whose = "API key" if level.limit.scope.startswith("key:") else "team"
    what = "requests" if level.limit.kind == REQUESTS else "tokens"
    metrics.RATE_LIMITED.labels("key" if whose == "API key" else "team", what).inc()
    if math.isinf(decision.retry_after):
        error = RateLimited(
            f"Request too large: it needs {level.limit.cost} {what} but the {whose}'s limit is "
            f"{level.limit.per_minute} {what} per minute.",
            headers=headers,
        )
        error.retryable = False
        return error
    retry = max(1, math.ceil(decision.retry_after))
    return RateLimited(
        f"Rate limit reached for this {whose}: {level.limit.per_minute} {what} per minute. "
        f"Please try again in {duration(decision.retry_after)}.",
        headers={**headers, "retry-after": str(retry)},
    )
