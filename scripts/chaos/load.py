"""The load phase: every planned request sent at its time, retried as a careful client would.

Requests start on schedule whatever the gateways are doing (an open loop, bounded by a cap on
requests in flight), so the faults always meet traffic. A request with an Idempotency-Key is
retried — on the next gateway, with growing pauses — when retrying is what a client should do: no
answer at all, a stream that broke off, 409 (the first attempt still runs), or a 503 that says the
ledger or the rate-limit store is briefly away. Upstream failures are not retried: the fake's
faults are in the request text, so a retry would only fail the same way. Some requests that
succeeded are sent once more on purpose: their stored answer must come back, charged nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx

from scripts.chaos.client import ANSWERED, BROKEN, COMPLETE, NO_ANSWER, Attempt, send
from scripts.chaos.traffic import Plan

#: Pauses before each retry of an idempotent request, in seconds: long enough in all (about 40 s)
#: to outlast a dead process's in-progress hold, which is released within 30 s.
RETRY_PAUSES = (0.5, 1, 2, 4, 8, 8, 8, 8)


def should_retry(attempt: Attempt) -> bool:
    if attempt.outcome in (NO_ANSWER, BROKEN):
        return True
    if attempt.status == 409 and "still in progress" in attempt.error:
        return True
    return attempt.status == 503 and (
        "billing ledger" in attempt.error
        or "key directory" in attempt.error
        or "Rate limits cannot be checked" in attempt.error
    )


def succeeded(attempt: Attempt) -> bool:
    return attempt.status == 200 and (attempt.outcome in (COMPLETE, ANSWERED))


class Load:
    """Sends ``plans`` to the gateways and keeps every attempt."""

    def __init__(
        self,
        plans: list[Plan],
        urls: Callable[[int], str],
        pids: Callable[[int], int],
        keys: list[tuple[str, str]],
        gateways: int,
        concurrency: int,
    ) -> None:
        self.plans = plans
        self._url = urls
        self._pid = pids
        self._keys = keys
        self._gateways = gateways
        self._slots = asyncio.Semaphore(concurrency)
        self.attempts: list[Attempt] = []
        #: Streams delivering right now, per gateway (the kill waits for some on its victim).
        self.streaming: dict[int, int] = {}
        self.started = 0.0
        self.sent = 0

    async def run(self) -> None:
        self.started = time.time()
        limits = httpx.Limits(
            max_connections=500, max_keepalive_connections=0
        )  # a killed gateway leaves no stale connection
        timeout = httpx.Timeout(30.0, connect=5.0)
        async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
            await asyncio.gather(*(self._request(client, plan) for plan in self.plans))

    async def _attempt(
        self, client: httpx.AsyncClient, plan: Plan, number: int, gateway: int, replay: bool = False
    ) -> Attempt:
        attempt = Attempt(
            plan=plan.index, number=number, gateway=gateway, pid=self._pid(gateway), started=time.time(), replay=replay
        )
        self.attempts.append(attempt)
        self.sent += 1
        routed = plan if gateway == plan.gateway else _on(plan, gateway)
        return await send(client, self._url(gateway), routed, self._keys[plan.team][plan.key], attempt, self.streaming)

    async def _request(self, client: httpx.AsyncClient, plan: Plan) -> None:
        delay = self.started + plan.at - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        async with self._slots:
            attempt = await self._attempt(client, plan, 1, plan.gateway)
        if not plan.idempotency_key:
            return
        number = 1
        for pause in RETRY_PAUSES:
            if not should_retry(attempt):
                break
            await asyncio.sleep(pause)
            number += 1
            async with self._slots:
                attempt = await self._attempt(client, plan, number, (plan.gateway + number - 1) % self._gateways)
        if plan.replay and succeeded(attempt):
            for pause in (0, *RETRY_PAUSES[:4]):  # the replay too may meet an outage
                await asyncio.sleep(pause)
                number += 1
                async with self._slots:
                    replay = await self._attempt(client, plan, number, (attempt.gateway + 1) % self._gateways, True)
                if not should_retry(replay):
                    break


def _on(plan: Plan, gateway: int) -> Plan:
    """The same request, sent to another gateway (its streaming count goes to that one)."""
    from dataclasses import replace

    return replace(plan, gateway=gateway)
