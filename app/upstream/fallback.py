"""The deployments of one model behind one upstream: a weighted choice, and failover before the answer.

A model may list several deployments of itself (``upstreams = [...]`` in the configuration: other
regions, providers or keys). Each request tries them in a weighted random order; a deployment that
fails before it began answering (refused or reset connection, a timeout waiting for the status, a
5xx or 429 status) hands the request to the next one after a short jittered backoff, up to the
model's ``max_attempts``. Once a deployment answers (a 2xx status), it is the one: a failure after
that is the client's to see, because part of the answer may have been relayed already, and the
deployment has done (and been paid for) the work.

This sits below the routes on purpose. They hold the worst case once, call one upstream and then
charge or release once; failed attempts here move no money, so the ledger only ever charges the
attempt that answered. The client gets the last attempt's error if every attempt failed.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from app.errors import GatewayError
from app.observability.record import current_record
from app.upstream.base import Answer, RawStream, Upstream
from app.upstream.media import ByteStream, RawAnswer, Upload

log = logging.getLogger("tollgate.upstream")

T = TypeVar("T")

#: The pause before the n-th retry is BACKOFF × 2ⁿ (at most BACKOFF_CAP), times a random 0.5–1.
BACKOFF = 0.05
BACKOFF_CAP = 1.0


@dataclass(frozen=True)
class Deployment:
    """One adapter and the model name that deployment knows the model by."""

    adapter: Upstream
    model: str
    weight: int = 1
    #: Its price's key in the price list when it has a price of its own (``MODEL/NAME``; "": the model's).
    price_key: str = ""


#: The price key of the deployment that answered the current request's last upstream call (set in the
#: request's own task, read by the billed call right after the call returns: ``served_price_key``).
_SERVED_PRICE_KEY: ContextVar[str] = ContextVar("served_price_key", default="")


def served_price_key() -> str:
    """The price key of the deployment that answered this task's last call ("": the model's price)."""
    return _SERVED_PRICE_KEY.get()


def weighted_order(weights: Sequence[int], rng: random.Random) -> list[int]:
    """Indices of ``weights`` in the order to try them: each next one drawn by weight from those left,
    so the first attempt lands on each deployment in proportion to its weight."""
    left = list(range(len(weights)))
    order: list[int] = []
    while len(left) > 1:
        pick = rng.choices(left, weights=[weights[i] for i in left])[0]
        order.append(pick)
        left.remove(pick)
    return order + left


class FallbackUpstream:
    """An :class:`~app.upstream.base.Upstream` over the deployments of one model.

    Every call puts the called deployment's own model name into the body, so callers may send any
    name. All deployments speak the same wire (the configuration refuses a mix).
    """

    def __init__(
        self,
        model_id: str,
        deployments: Sequence[Deployment],
        *,
        max_attempts: int | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if not deployments:
            raise ValueError(f"model {model_id!r} has no deployments")
        wires = {d.adapter.wire for d in deployments}
        if len(wires) != 1:
            raise ValueError(f"model {model_id!r} mixes wires {sorted(wires)}")
        self.model_id = model_id
        self.deployments = list(deployments)
        self.wire: str = deployments[0].adapter.wire
        self.max_attempts = min(max_attempts or len(deployments), len(deployments))
        self._rng = rng or random.Random()

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        """A non-streaming answer; nothing reached the client yet, so a failed attempt is retried whole."""
        return await self._first_answer(lambda d: d.adapter.complete({**body, "model": d.model}, headers))

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> RawStream:
        """A stream, retried only until a deployment answers with its status; never once it is open."""
        return await self._first_answer(lambda d: d.adapter.open_stream({**body, "model": d.model}, headers))

    async def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        """A JSON answer from another endpoint (``/embeddings``), retried whole like ``complete``."""
        return await self._first_answer(lambda d: d.adapter.post(path, {**body, "model": d.model}, headers))

    async def post_upload(
        self, path: str, upload_for: Callable[[str], Upload], headers: dict[str, str] | None = None
    ) -> RawAnswer:
        """A multipart upload (``/audio/transcriptions``), retried whole like ``complete``:
        ``upload_for`` makes the body for a deployment's name of the model."""
        return await self._first_answer(lambda d: d.adapter.post_upload(path, upload_for(d.model), headers))

    async def open_bytes(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> ByteStream:
        """An answer relayed as bytes (``/audio/speech``), retried only until a deployment answers
        with its status; never once it is open."""
        return await self._first_answer(lambda d: d.adapter.open_bytes(path, {**body, "model": d.model}, headers))

    async def open_upload(
        self, path: str, upload_for: Callable[[str], Upload], headers: dict[str, str] | None = None
    ) -> ByteStream:
        """A multipart upload whose answer is relayed as bytes (a streamed transcription), retried
        only until a deployment answers with its status; never once it is open."""
        return await self._first_answer(lambda d: d.adapter.open_upload(path, upload_for(d.model), headers))

    async def aclose(self) -> None:
        for deployment in self.deployments:
            await deployment.adapter.aclose()

    async def _first_answer(self, call: Callable[[Deployment], Awaitable[T]]) -> T:
        order = weighted_order([d.weight for d in self.deployments], self._rng)[: self.max_attempts]
        record = current_record()
        for attempt, index in enumerate(order):
            if record is not None:
                record.upstream_attempts, record.deployment = attempt + 1, index
            try:
                answer = await call(self.deployments[index])
            except GatewayError as exc:
                if record is not None:
                    record.upstream_failed(exc.upstream_kind)
                if not exc.failover or attempt == len(order) - 1:
                    raise
                delay = min(BACKOFF_CAP, BACKOFF * 2**attempt) * self._rng.uniform(0.5, 1.0)
                log.warning(
                    "model %s: deployment %d failed before answering (%s: %s); trying deployment %d "
                    "in %.0f ms (attempt %d of %d)",
                    self.model_id,
                    index,
                    exc.status,
                    exc.message,
                    order[attempt + 1],
                    delay * 1000,
                    attempt + 2,
                    len(order),
                )
                await asyncio.sleep(delay)
                continue
            _SERVED_PRICE_KEY.set(self.deployments[index].price_key)
            return answer
        raise AssertionError("unreachable: the last attempt returns or raises")
