"""One billed call: the hold placed, the upstream called, then a charge or a release — exactly once.

A request's money moves in three steps whatever its endpoint: a hold for its worst case before it
goes upstream, then either a charge for what it used or a release of the hold. Between the hold and
the settlement anything can happen: the upstream refuses or breaks off mid-stream, the client hangs
up, the task is cancelled, the ledger cannot be written, a translation fails. Each of those must end
in one settlement, never none (a hold left to expire) and never two (a request charged twice).

So the call is an async context manager, and its phase is the one record of what has happened:

- ``HELD``: the hold is placed and nothing of the answer has reached the client. Leaving the block
  in this phase — an upstream error, a cancellation, any exception — releases the hold (awaited: the
  client is still waiting for its error answer).
- ``DELIVERING``: a stream is open and frames may have gone out. Leaving in this phase means the
  stream ended early (the client hung up, was cut off, or the relay failed): what was delivered is
  charged, or the hold released, without waiting — the client is gone.
- ``SETTLED``: a charge or release was handed to :class:`~app.ledger.billing.Billing`, which owns
  the outcome from then on (a charge cut off half-way is still made; one the ledger cannot record
  is owed), so leaving does nothing more.

Leaving also gives a stream's slot back, if ``last_frames`` did not already (a stream's last frames
go out with the end of its body, and its slot must be free before that, so that a client that opens
its next stream at once finds it free), and closes the upstream's stream. The relay
(``app/http/relay.py``) says what happened; this module decides what it costs.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio
from litestar import Request, Response

from app.errors import GatewayError
from app.http.answer_head import encoded_headers
from app.http.billed_request import BilledRequest, HoldSize, Outbound
from app.http.event_stream import LastChunk
from app.http.prompt_size import model_rules
from app.http.refusals import http_error, service_refusals_answered
from app.ledger.billing import RequestBill
from app.ledger.refusals import REFUSALS
from app.observability import timeline
from app.ratelimit.streams import StreamSlot
from app.runtime import BillingServices
from app.tokens.delivered import Delivered
from app.upstream import Answer, RawStream
from app.upstream.fallback import FallbackUpstream, Outgoing, served
from domain.usage import TokenUsage

#: What goes upstream: a generation's :class:`~app.translate.exchange.Exchange`, or another
#: endpoint's :class:`~app.http.billed_request.Direct` request.
P = TypeVar("P", bound=Outbound)
T = TypeVar("T")
#: The charge's signed receipt (``docs/transparency.md``), on a whole answer; a stream's is in its usage.
RECEIPT_HEADER = "x-tollgate-receipt"


class Phase(enum.Enum):
    HELD = "held"
    DELIVERING = "delivering"
    SETTLED = "settled"


class BilledCall(Generic[P]):
    """A held request on its way to the upstream and back; ``async with`` it to have it settled.

    Made by :func:`hold` only, once the hold is placed; the block that enters it must follow the
    hold with no await in between, so that nothing can come between a hold and its settlement.
    ``exchange`` is what goes upstream (``P``): a generation's exchange, or, for any other endpoint,
    a :class:`~app.http.billed_request.Direct` request its route sends with :meth:`call_upstream`."""

    __slots__ = (
        "_delivered",
        "_services",
        "_slot",
        "_stream",
        "bill",
        "billed",
        "exchange",
        "headers",
        "phase",
        "served_wire",
        "transcript",
    )

    def __init__(
        self,
        services: BillingServices,
        billed: BilledRequest,
        bill: RequestBill,
        exchange: P,
        headers: dict[str, str],
        slot: StreamSlot | None,
    ) -> None:
        #: What the request is (frozen), and its billing context (what the ledger holds of it).
        self.billed = billed
        self.bill = bill
        self.exchange = exchange
        #: The answer's headers: rate limits, the request id, what was dropped from the request.
        self.headers = headers
        #: Where an idempotent stream's frames are kept, to be stored with its charge.
        self.transcript: list[bytes] | None = [] if bill.idempotency is not None else None
        self.phase = Phase.HELD
        #: The wire of the deployment that answered (until one has: the one the request was sized for).
        self.served_wire = billed.upstream_wire
        self._services = services
        self._slot = slot
        self._stream: RawStream | None = None
        self._delivered: Delivered | None = None

    @property
    def delivered(self) -> Delivered:
        """What the client was sent, counted with the model's rules: the bill of a stream that ended
        early, and of an answer whose upstream reported no usage (made when first asked for: most
        plain answers never need it)."""
        if self._delivered is None:
            rules = model_rules(self.billed.model, self.served_wire)
            self._delivered = Delivered(rules, self.billed.prompt_tokens)
        return self._delivered

    async def __aenter__(self) -> BilledCall[P]:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """The one place an unsettled call is settled, however the block was left."""
        phase, self.phase = self.phase, Phase.SETTLED
        try:
            if phase is Phase.HELD:
                await self._services.billing.release(self.bill, "upstream failed")
            elif phase is Phase.DELIVERING:
                self._settle_soon()
        finally:
            if self._slot is not None:
                await give_back(self._slot)
            if self._stream is not None:
                self._stream.close()

    async def complete(self, planned: Mapping[str, Outgoing]) -> Answer:
        """The upstream's whole answer to a generation request planned for each wire in ``planned``
        (``served_wire`` says which answered)."""
        return await self.call_upstream(lambda upstream: upstream.complete_planned(planned))

    async def call_upstream(self, send: Callable[[FallbackUpstream], Awaitable[T]]) -> T:
        """What ``send`` gets from the model's upstream (its deployments, with failover): any call
        that is not a stream (``upstream.post(path, body, headers)`` for a JSON endpoint other than
        generation). A failure is raised as the upstream's own error when the request went as the
        client wrote it (``exchange.passthrough_wire``), leaving the call held: the block's exit
        releases the hold."""
        upstream = self._services.upstreams[self.billed.model.id]
        try:
            answer = await send(upstream)
        except GatewayError as exc:
            self._verbatim(exc)
            raise
        self._answered_by_served()
        if timeline.on:
            timeline.mark("upstream", self.bill.record)
        return answer

    async def open_stream(self, planned: Mapping[str, Outgoing]) -> RawStream:
        """The upstream's stream for a request planned for each wire in ``planned``, open: from here
        on the client may be sent part of the answer, which is what an early end is billed for, and
        what a dead process is billed for by another (the streams in flight, reported with the
        heartbeat)."""
        upstream = self._services.upstreams[self.billed.model.id]
        try:
            self._stream = await upstream.open_stream_planned(planned)
        except GatewayError as exc:
            self._verbatim(exc)
            raise
        self._answered_by_served()
        if timeline.on:
            timeline.mark("upstream", self.bill.record)
        self.phase = Phase.DELIVERING
        if self.bill.record is not None:
            self.bill.record.stream_opened = True
        self._services.in_flight.track(self.bill, self.delivered)
        return self._stream

    def _answered_by_served(self) -> None:
        """Note the deployment that just answered: the charge is at its price, and what it sent is
        counted with its wire's rules."""
        answered = served()
        if answered is not None:
            self.bill.price_key, self.served_wire = answered.price_key, answered.wire

    async def last_frames(self, frames: bytes) -> LastChunk:
        """A stream's last frames, about to go out with the end of its body: its slot is given back
        first, so that a client that opens its next stream as soon as this one ended finds it free."""
        if self._slot is not None:
            await give_back(self._slot)
        return LastChunk(frames)

    def seal(self, extra: Mapping[str, str] | None = None) -> None:
        """Complete the answer's headers (with ``extra``) and check that HTTP can carry every one of
        them, while the call is only held: an answer is never charged and then found unsendable (the
        client would pay for an answer it never got, and its SDK's retries would pay again). A head
        that cannot be sent raises :class:`~app.http.answer_head.UnsendableHead` here, which releases
        the hold like any failure before the answer. Nothing changes the headers afterwards."""
        if extra:
            self.headers.update(extra)
        encoded_headers(self.headers)

    def _verbatim(self, exc: GatewayError) -> None:
        """A request passed through gets the upstream's own error word for word (coding agents match
        on it); a translated one gets the gateway's, in its own protocol."""
        exc.verbatim = exc.upstream_wire is not None and exc.upstream_wire == self.exchange.passthrough_wire

    async def charge(
        self, usage: TokenUsage, render: Callable[[dict[str, Any]], bytes], content_type: str = "application/json"
    ) -> bytes:
        """Charge a whole answer; returns its body, which ``render`` makes from the charge's usage
        fields (and which is stored under the request's Idempotency-Key, as ``content_type``)."""
        self.phase = Phase.SETTLED
        with service_refusals_answered():
            charge, body = await self._services.billing.charge(
                self.bill, usage, lambda charge: render(charge.usage_fields()), content_type=content_type
            )
        if charge.receipt:  # a whole answer's head goes out after its charge: it can carry the receipt
            self.headers[RECEIPT_HEADER] = charge.receipt
        if timeline.on:
            timeline.mark("charged", self.bill.record)
        return body

    async def charge_stream(
        self,
        usage: TokenUsage,
        final: Callable[[dict[str, Any]], list[bytes]],
        content_type: str = "text/event-stream",
    ) -> bytes:
        """Charge a finished stream and return its final frames, which report the charge (so it is
        durable before they go out). ``final`` may run more than once (if the ledger must decide
        again), so it must not change what it reads. ``content_type``: the stream's, as an
        Idempotency-Key's stored answer is served again (Gemini's JSON array is not events)."""
        self.phase = Phase.SETTLED
        with service_refusals_answered():
            _, body = await self._services.billing.charge(
                self.bill,
                usage,
                lambda charge: b"".join(final(charge.usage_fields())),
                prefix=b"".join(self.transcript or ()),
                content_type=content_type,
                delivered=True,
            )
        if timeline.on:
            timeline.mark("charged", self.bill.record)
        return body

    async def charge_delivered(self, usage: TokenUsage, content_type: str) -> None:
        """Charge an answer relayed as bytes once all of it went out (speech audio): an Idempotency-Key's
        stored answer is what was sent (``transcript``), as ``content_type``."""
        self.phase = Phase.SETTLED
        with service_refusals_answered():
            await self._services.billing.charge(
                self.bill,
                usage,
                lambda _: b"",
                prefix=b"".join(self.transcript or ()),
                content_type=content_type,
                delivered=True,
            )
        if timeline.on:
            timeline.mark("charged", self.bill.record)

    async def settle_partial(self, exc: GatewayError) -> None:
        """The upstream failed mid-stream (``exc``): bill what the client was sent (prompt and output
        tokens), or release the hold if it was sent nothing."""
        self.phase = Phase.SETTLED
        record = self.bill.record
        if record is not None:
            record.upstream_failed(exc.upstream_kind)
            record.failed(exc.message)
        if self.delivered:
            with service_refusals_answered():
                await self._services.billing.charge(self.bill, self.delivered.usage(), delivered=True)
        else:
            await self._services.billing.release(self.bill, "upstream failed mid-stream")

    def _settle_soon(self) -> None:
        """The client went away: bill what the gateway sent it, or release, without waiting. Frames
        written just before the hang-up may never have reached the client; they are billed all the
        same (the gateway cannot know, and the upstream produced them)."""
        billing = self._services.billing
        if self.bill.record is not None:
            self.bill.record.failed("client disconnected")
        if self.delivered:
            billing.charge_soon(self.bill, self.delivered.usage())
        else:
            billing.release_soon(self.bill, "client disconnected")


async def hold(
    services: BillingServices,
    request: Request[Any, Any, Any],
    billed: BilledRequest,
    exchange: P,
    size: HoldSize,
) -> BilledCall[P] | Response[bytes]:
    """Take a stream's slot (429 over the concurrent-stream limits), admit the request against its
    rate limits, then hold its worst case (``size``). Returns the held call, or — for an
    Idempotency-Key whose request was served before — its stored answer, charged nothing more. The
    slot goes with the call; refused or replayed, it is given back here."""
    slot = await services.streams.take(billed.principal.key_id) if billed.stream else None
    held: BilledCall[P] | Response[bytes] | None = None
    try:
        held = await _admitted_and_held(services, request, billed, exchange, size, slot)
        return held
    finally:
        if slot is not None and not isinstance(held, BilledCall):
            await give_back(slot)


async def _admitted_and_held(
    services: BillingServices,
    request: Request[Any, Any, Any],
    billed: BilledRequest,
    exchange: P,
    size: HoldSize,
    slot: StreamSlot | None,
) -> BilledCall[P] | Response[bytes]:
    """Admit the request against its rate limits, then hold it. With an Idempotency-Key, the ledger
    is asked for the key's stored answer against the very team state the hold is decided on
    (``Billing.hold``), so no retry slips between a charge and its stored answer; that answer is
    returned instead, under the original request's id."""
    record = billed.record
    admission = await services.limiter.admit(billed.principal, size.admitted_tokens)
    if timeline.on:
        timeline.mark("admitted", record)
    request.state.rate_limit_headers = admission.headers  # sent with any error from here on
    bill = billed.bill(admission)
    headers = dict(admission.headers)
    if record is not None:
        record.request_id = billed.request_id  # the id the charge records is the one the answer carries
    else:
        headers["x-request-id"] = billed.request_id
    try:
        stored = await services.billing.hold(bill, size.worst_case)
    except REFUSALS as exc:
        services.limiter.correct_soon(admission, 0)  # refused before any token was used
        raise http_error(exc) from None
    if timeline.on:
        timeline.mark("held", record)
    if stored is None:
        return BilledCall(services, billed, bill, exchange, headers, slot)
    services.limiter.correct_soon(admission, 0)  # a replay uses no tokens
    if record is not None:
        record.request_id = stored.request_id  # the answer is the original request's, under its id
    else:
        headers["x-request-id"] = stored.request_id
    return Response(stored.response, media_type=stored.content_type, headers={**headers, "idempotent-replayed": "true"})


async def give_back(slot: StreamSlot) -> None:
    """Give a stream's slot back, even from a stream being cancelled (the client went away). A slot
    of this process alone is given back without a pause, where no cancellation can reach it; one
    shared through Redis waits for Redis, shielded."""
    if not slot.in_redis:
        await slot.release()
        return
    with anyio.CancelScope(shield=True):
        await slot.release()
