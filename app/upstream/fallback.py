"""The deployments of one model behind one upstream: a weighted choice, and failover before the answer.

A model may list several deployments of itself (``upstreams = [...]`` in the configuration: other
regions, providers or keys). Each request tries them in a weighted random order; a deployment that
fails before it began answering (refused or reset connection, a timeout waiting for the status, a
5xx or 429 status) hands the request to the next one after a short jittered backoff, up to the
model's ``max_attempts``. Once a deployment answers (a 2xx status), it is the one: a failure after
that is the client's to see, because part of the answer may have been relayed already, and the
deployment has done (and been paid for) the work.

A model's deployments may speak different wires (Claude on ``anthropic`` and on ``bedrock`` with
``api = "converse"``, say): a generation request is then planned once per wire before anything is
held (``app/http/relay.py``), and each attempt sends the plan of its deployment's wire
(:meth:`FallbackUpstream.complete_planned`); deployments whose wire the request could not be planned
for are not tried. The wire that answered is the caller's to read (``served_wire``), to decode the
answer with that wire's plan.

This sits below the routes on purpose. They hold the worst case once, call one upstream and then
charge or release once; failed attempts here move no money, so the ledger only ever charges the
attempt that answered. The client gets the last attempt's error if every attempt failed.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
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


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A request as the deployments of one wire take it: its body (whose ``model`` each deployment
    replaces with its own name for the model) and the client's headers forwarded with it."""

    body: dict[str, Any]
    headers: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Served:
    """The deployment that answered a call: its price key in the price list ("": the model's price)
    and the wire it speaks."""

    price_key: str
    wire: str


#: Who answered the current request's last upstream call (set in the request's own task, read by the
#: billed call right after the call returns: ``served``).
_SERVED: ContextVar[Served | None] = ContextVar("served", default=None)


def served() -> Served | None:
    """The deployment that answered this task's last call (None: no call answered in this task)."""
    return _SERVED.get()


def served_price_key() -> str:
    """The price key of the deployment that answered this task's last call ("": the model's price)."""
    answered = _SERVED.get()
    return answered.price_key if answered is not None else ""


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
    name. ``wire`` is the first deployment's: the wire of a body given to :meth:`complete` or
    :meth:`open_stream`, which go to the deployments of that wire only; ``wires`` are all of them,
    in the order of the deployments, for a request planned per wire (:meth:`complete_planned`).
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
        self.model_id = model_id
        self.deployments = list(deployments)
        self.wire: str = deployments[0].adapter.wire
        self.wires: tuple[str, ...] = tuple(dict.fromkeys(d.adapter.wire for d in deployments))
        self.max_attempts = min(max_attempts or len(deployments), len(deployments))
        self._rng = rng or random.Random()

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        """A non-streaming answer from a deployment of the first wire (``wire``)."""
        return await self.complete_planned({self.wire: Outgoing(body, headers)})

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> RawStream:
        """A stream from a deployment of the first wire (``wire``)."""
        return await self.open_stream_planned({self.wire: Outgoing(body, headers)})

    async def complete_planned(self, planned: Mapping[str, Outgoing]) -> Answer:
        """A non-streaming answer from a deployment of a wire the request was planned for (``planned``:
        by wire); nothing reached the client yet, so a failed attempt is retried whole."""
        return await self._first_answer(
            lambda d: d.adapter.complete(_named(planned[d.adapter.wire], d), planned[d.adapter.wire].headers),
            lambda d: d.adapter.wire in planned,
        )

    async def open_stream_planned(self, planned: Mapping[str, Outgoing]) -> RawStream:
        """A stream from a deployment of a wire the request was planned for, retried only until a
        deployment answers with its status; never once it is open."""
        return await self._first_answer(
            lambda d: d.adapter.open_stream(_named(planned[d.adapter.wire], d), planned[d.adapter.wire].headers),
            lambda d: d.adapter.wire in planned,
        )

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

    async def _first_answer(
        self, call: Callable[[Deployment], Awaitable[T]], eligible: Callable[[Deployment], bool] = lambda d: True
    ) -> T:
        """``call``'s answer from the first deployment (of those ``eligible``) that answers, in a
        weighted random order, at most ``max_attempts`` of them."""
        candidates = [i for i, d in enumerate(self.deployments) if eligible(d)]
        if not candidates:
            raise ValueError(f"model {self.model_id!r}: no deployment speaks a wire the request was planned for")
        weights = [self.deployments[i].weight for i in candidates]
        order = [candidates[i] for i in weighted_order(weights, self._rng)][: self.max_attempts]
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
            chosen = self.deployments[index]
            _SERVED.set(Served(chosen.price_key, chosen.adapter.wire))
            return answer
        raise AssertionError("unreachable: the last attempt returns or raises")


def _named(outgoing: Outgoing, deployment: Deployment) -> dict[str, Any]:
    """``outgoing``'s body with the deployment's own name for the model."""
    return {**outgoing.body, "model": deployment.model}
