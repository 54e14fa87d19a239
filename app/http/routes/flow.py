"""The billed request, shared by every endpoint: size, plan, hold, call the upstream, charge, answer.

Endpoints differ only in how they parse a request; what goes upstream and what comes back is an
:class:`~app.http.routes.exchange.Exchange` (passed through or translated), and the money moves the same
way for all of them. For a stream, the charge is durable before the final frame that reports it,
and a stream that ends early is billed for what was delivered, or released.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, TypeVar

import copy
import hashlib

import anyio
from litestar import Request, Response
from litestar.response import Stream

from app.ledger.billing import Idempotency, RequestBill
from app.errors import GatewayError, InvalidRequest
from app.keys import Principal
from app.ratelimit.streams import StreamSlot
from app.observability.record import current_record, new_request_id
from app.json import encode
from app.http.routes.exchange import EventReader, Exchange, StreamWriter, plan
from app.http.routes.prompt_size import measure_prompt, model_rules
from app.runtime import Runtime
from app.tokens import Protocol as Wire
from app.tokens.delivered import Delivered
from app.translate import canonical as c
from app.upstream import RawStream
from domain import endpoints
from domain.pricing import TokenUsage
from domain.settings import Model

T = TypeVar("T")

SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
ENDPOINTS: dict[str, str] = {"chat": endpoints.CHAT, "responses": endpoints.RESPONSES, "messages": endpoints.MESSAGES}


async def open_bill(runtime: Runtime, request: Request[Any, Any, Any], principal: Principal, model: Model,
                    endpoint: str, raw_body: bytes, worst_case: int,
                    admitted_tokens: int = 0) -> tuple[RequestBill, dict[str, str], Response[bytes] | None]:
    """Admit a request against its rate limits (``admitted_tokens``: its token estimate), then hold
    the worst case for it; with an Idempotency-Key, the request id is derived from the key (so the
    ledger sees retries as the same request) and a request already served gets its stored answer
    back instead (the third value), charged nothing more."""
    idem_key = request.headers.get("idempotency-key")
    record = current_record()
    idempotency = None
    if idem_key is not None:
        if not 0 < len(idem_key) <= 255:
            raise InvalidRequest("The Idempotency-Key header must be 1 to 255 characters long.")
        idempotency = Idempotency(idem_key, hashlib.sha256(raw_body).hexdigest())
    # Every attempt is a request of its own, also under an Idempotency-Key: the ledger serves one
    # attempt per key at a time, a retry gets the stored answer of the one that completed, and once
    # that answer expires a retry is a new request, charged under its own id.
    request_id = record.request_id if record is not None else new_request_id()
    admission = await runtime.limiter.admit(principal, admitted_tokens)
    request.state.rate_limit_headers = admission.headers  # sent with any error from here on
    bill = RequestBill(principal, model, request_id, endpoint, idempotency, admission, record=record)
    headers = dict(admission.headers)
    if record is not None:
        record.request_id = request_id  # the id the charge records is the one the answer carries
    else:
        headers["x-request-id"] = request_id
    try:
        stored = await runtime.billing.hold(bill, worst_case)
    except GatewayError:
        runtime.limiter.correct_soon(admission, 0)  # refused before any token was used
        raise
    if stored is None:
        return bill, headers, None
    runtime.limiter.correct_soon(admission, 0)  # a replay uses no tokens
    if record is not None:
        record.request_id = stored.request_id  # the answer is the original request's, under its id
    else:
        headers["x-request-id"] = stored.request_id
    replay = Response(stored.response, media_type=stored.content_type,
                      headers={**headers, "idempotent-replayed": "true"})
    return bill, headers, replay


def check_output_limit(requested: int | None, model: Model, param: str) -> None:
    """An output limit above what the model can produce is a client error, not a silent clamp."""
    if requested is not None and requested > model.max_output_tokens:
        raise InvalidRequest(f"'{param}' is {requested}, but the model `{model.id}` produces at most "
                             f"{model.max_output_tokens} output tokens.", param=param)


async def billed(runtime: Runtime, request: Request[Any, Any, Any], principal: Principal, model: Model,
                 protocol: Wire, body: dict[str, Any], raw_body: bytes, *, max_output: int,
                 requested_output: int) -> Response[bytes] | Stream:
    """Serve a request the caller may make: size its prompt, decide what goes upstream, hold its
    worst case (``max_output`` output tokens; ``requested_output`` is what the client asked for, its
    rate-limit estimate), then call and charge. Everything that can refuse it does so before the hold."""
    wire = runtime.upstreams[model.id].wire
    prompt_tokens = await measure_prompt(model, wire, body, protocol, len(raw_body))
    exchange = plan(model, wire, protocol, body, request, prompt_tokens)
    slot = await runtime.streams.take(principal.key_id) if exchange.stream else None
    try:
        bill, headers, replay = await open_bill(runtime, request, principal, model, ENDPOINTS[protocol], raw_body,
                                                runtime.billing.worst_case(model, prompt_tokens, max_output),
                                                prompt_tokens + requested_output)
        if replay is not None:
            return replay
        if protocol == "messages":
            headers["request-id"] = bill.request_id
        return await serve(runtime, bill, exchange, prompt_tokens, headers, slot)
    finally:
        if slot is not None and not slot.relayed:
            await give_back(slot)  # refused, replayed or failed before its relay began: the relay gives it back otherwise


async def serve(runtime: Runtime, bill: RequestBill, exchange: Exchange, prompt_tokens: int,
                headers: dict[str, str], slot: StreamSlot | None = None) -> Response[bytes] | Stream:
    """The billed call: the hold is placed; call the upstream, then charge what it reports (or what
    was delivered), or release the hold if it failed before answering — exactly once either way.
    A stream's ``slot`` (its place under the concurrent-stream limits) is given back when its relay ends."""
    upstream = runtime.upstreams[bill.model.id]
    if exchange.dropped_tools:
        headers["x-tollgate-dropped-tools"] = ", ".join(exchange.dropped_tools)
        if bill.record is not None:
            bill.record.dropped_tools = list(exchange.dropped_tools)
    if not exchange.stream:
        answer = await _called(runtime, bill, exchange, upstream.complete(exchange.body, exchange.headers))
        resp = exchange.decode(answer)
        if resp.usage is None:
            delivered = delivery_for(runtime, bill, prompt_tokens)
            c.deliver_answer(resp.parts, delivered)
            resp.usage = delivered.usage()
        _, body = await runtime.billing.charge(
            bill, resp.usage, lambda ch: encode(exchange.render(answer, resp, ch.usage_fields())))
        return Response(body, headers=headers, media_type="application/json")

    stream = await _called(runtime, bill, exchange, upstream.open_stream(exchange.body, exchange.headers))
    transcript = transcript_for(bill)
    delivered = delivery_for(runtime, bill, prompt_tokens)
    runtime.in_flight.track(bill, delivered)  # reported with the heartbeat, billed if this process dies
    relay = _relay(runtime, bill, stream, exchange.reader(), exchange.writer(), delivered, transcript, slot)
    return await start_stream(relay, headers, transcript)


async def _called(runtime: Runtime, bill: RequestBill, exchange: Exchange, call: Awaitable[T]) -> T:
    """The upstream's answer (or its open stream); if it failed, the hold is released, and a request
    passed through gets the upstream's own error word for word."""
    try:
        return await call
    except GatewayError as exc:
        await runtime.billing.release(bill, "upstream failed")
        exc.verbatim = exc.upstream_wire is not None and exc.upstream_wire == exchange.passthrough_wire
        raise
    except BaseException:
        await runtime.billing.release(bill, "upstream failed")
        raise


def delivery_for(runtime: Runtime, bill: RequestBill, prompt_tokens: int) -> Delivered:
    """An empty record of what the client is sent, to be counted with the model's rules."""
    return Delivered(model_rules(bill.model, runtime.upstreams[bill.model.id].wire), prompt_tokens)


def transcript_for(bill: RequestBill) -> list[bytes] | None:
    """Where an idempotent stream's frames are kept, to be stored with its charge."""
    return [] if bill.idempotency is not None else None


async def start_stream(relay: AsyncGenerator[bytes, None], headers: dict[str, str],
                       transcript: list[bytes] | None = None) -> Stream:
    """Start the relay before answering: a started generator is always closed (by the fast path
    once the answer ended, ``app/http/hot_paths.py``; by the event loop's finalizer if nobody iterates
    it, e.g. the client left before the headers), so its hold is always settled, whereas one that
    never started would never run its ``finally``."""
    if transcript is not None:
        relay = _recorded(relay, transcript)
    record = current_record()
    if record is not None:
        record.stream = True
    first = await relay.__anext__()  # type: ignore[attr-defined]
    return Stream(_prepend(first, relay), media_type="text/event-stream", headers={**headers, **SSE_HEADERS})


async def _recorded(relay: AsyncGenerator[bytes, None], transcript: list[bytes]) -> AsyncGenerator[bytes, None]:
    try:
        async for frame in relay:
            transcript.append(frame)
            yield frame
    finally:
        await relay.aclose()  # closing this closes the relay (its finally settles the hold)


async def charge_stream(runtime: Runtime, bill: RequestBill, usage: TokenUsage, final: Callable[[dict[str, Any]], list[bytes]],
                        transcript: list[bytes] | None) -> bytes:
    """Charge a finished stream and return its final frames, which report the charge. ``final`` may
    run more than once (if the ledger must decide again), so it must not change what it reads."""
    _, body = await runtime.billing.charge(
        bill, usage, lambda ch: b"".join(final(ch.usage_fields())),
        prefix=b"".join(transcript or ()), content_type="text/event-stream", delivered=True)
    return body


async def _prepend(first: bytes, rest: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
    try:
        yield first
        async for frame in rest:
            yield frame
    finally:
        await rest.aclose()  # closing the stream's iterator closes the relay


async def _relay(runtime: Runtime, bill: RequestBill, stream: RawStream, reader: EventReader, writer: StreamWriter,
                 delivered: Delivered, transcript: list[bytes] | None,
                 slot: StreamSlot | None = None) -> AsyncGenerator[bytes, None]:
    """Relay the upstream's events as the client's frames, as they come; charge before the final
    frames, which carry the cost. What the client was sent is noted once its frames have gone out
    (the generator resumed after them), so a stream that ends early — the client hung up, or was
    cut off for reading nothing (``write_timeout``) — is billed for exactly that."""
    usage: TokenUsage | None = None
    reasoning = 0
    settled = False
    if slot is not None:
        slot.relayed = True
    try:
        for frame in writer.start():
            yield frame
        try:
            async for raw in stream:
                content: list[c.Event] = []
                for event in reader.events(raw):
                    if isinstance(event, c.UsageReported):
                        delivered.reported = event.usage
                        if not event.partial:
                            usage, reasoning = event.usage, event.reasoning_tokens
                    else:
                        content.append(event)
                for frame in writer.write(raw, content):
                    yield frame
                for event in content:
                    c.deliver(event, delivered)
        except GatewayError as exc:
            # The upstream failed after the stream began: bill what was delivered, then say so in-stream.
            await settle_partial(runtime, bill, delivered, exc)
            settled = True
            for frame in writer.error(exc):
                yield frame
            return
        charged = usage or delivered.usage()
        try:
            final = await charge_stream(runtime, bill, charged,
                                        lambda extra: copy.deepcopy(writer).finish(charged, reasoning, extra), transcript)
        except GatewayError as exc:
            settled = True  # the hold stays open and visible; the client is told nothing was billed
            for frame in writer.error(exc):
                yield frame
            return
        settled = True
        yield final
    finally:
        if slot is not None:
            await give_back(slot)
        if not settled:
            settle_soon(runtime, bill, delivered)
        await close_quietly(stream)


async def settle_partial(runtime: Runtime, bill: RequestBill, delivered: Delivered, exc: GatewayError) -> None:
    """The upstream failed mid-stream (``exc``): bill what the client was sent (prompt and output
    tokens), or release the hold if it was sent nothing."""
    if bill.record is not None:
        bill.record.upstream_failed(exc.upstream_kind)
        bill.record.failed(exc.message)
    if delivered:
        await runtime.billing.charge(bill, delivered.usage(), delivered=True)
    else:
        await runtime.billing.release(bill, "upstream failed mid-stream")


def settle_soon(runtime: Runtime, bill: RequestBill, delivered: Delivered) -> None:
    """The client went away: bill what the gateway sent it, or release, without waiting. Frames
    written just before the hang-up may never have reached the client; they are billed all the same
    (the gateway cannot know, and the upstream produced them)."""
    if bill.record is not None:
        bill.record.failed("client disconnected")
    if delivered:
        runtime.billing.charge_soon(bill, delivered.usage())
    else:
        runtime.billing.release_soon(bill, "client disconnected")


async def give_back(slot: StreamSlot) -> None:
    """Give a stream's slot back, even from a stream being cancelled (the client went away)."""
    with anyio.CancelScope(shield=True):
        await slot.release()


async def close_quietly(stream: Any) -> None:
    with anyio.CancelScope(shield=True):
        await stream.aclose()
