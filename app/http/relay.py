"""The billed request, shared by every generation endpoint: size, plan, hold, call, charge, answer.

Endpoints differ only in how they parse and authorise a request (``app/http/routes/``); what goes
upstream and what comes back is an :class:`~app.translate.exchange.Exchange`, whose codec either
passes the upstream's answer through or translates it, and the money moves the same way for all of
them, plain or streamed, inside one :class:`~app.http.billed_call.BilledCall`. So a change to how a
request is billed is made here once, not once per endpoint or per protocol pair.

For a stream, the charge is durable before the final frames that report it, and a stream that ends
early is billed for what was delivered, or released (the call decides; the relay only says what
happened).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from litestar import Request, Response

from app.errors import GatewayError, InsufficientCreditsError
from app.http.answer_head import header_text
from app.http.attribution import attribution_of
from app.http.billed_call import BilledCall, hold
from app.http.billed_request import ENDPOINTS, BilledRequest, Generation, HoldSize, idempotency_of, request_id_of
from app.http.event_stream import EventStream
from app.http.wire_plans import plan_for_each_wire, widest_exposure
from app.observability.record import current_record
from app.runtime import BillingServices, Runtime
from app.tokens.delivered import Delivered
from app.translate import canonical as c
from app.translate.exchange import EVENT_STREAM, Exchange
from app.translate.output_limit import MIN_CLAMPED_OUTPUT, clamp_output
from domain.usage import TokenUsage

#: A generation's billed call: what goes upstream is its exchange (passed through or translated).
GenerationCall = BilledCall[Exchange]
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
#: Names the built-in tools taken out of a translated request (each percent-encoded: README, API).
DROPPED_HEADER = "x-tollgate-dropped-tools"
#: Says that the request's output limit was lowered to what the balance covers, or to the model's
#: own (the new limit).
CLAMPED_HEADER = "x-tollgate-output-clamped"
#: Each protocol's name for a request's output limit, as a refusal for credits names it.
OUTPUT_FIELDS: dict[str, str] = {
    "chat": "max_tokens",
    "responses": "max_output_tokens",
    "messages": "max_tokens",
    "gemini": "generationConfig.maxOutputTokens",
}


async def serve(runtime: Runtime, request: Request[Any, Any, Any], asked: Generation) -> Response[bytes] | EventStream:
    """Serve a request the caller may make: size its prompt, decide what goes upstream, hold its
    worst case (``asked.output``: the output it may use in all its choices, and what the client asked
    for, its rate-limit estimate), then call and charge. Everything that can refuse it does so before
    the hold. A request lowered to the model's own output limit (``clamp_output_to_model``) is
    answered saying so."""
    services, protocol, model_limit = runtime.billing_services, asked.protocol, asked.output.model_limit
    body = asked.body if model_limit is None else clamp_output(asked.body, protocol, model_limit)
    attribution = attribution_of(request, protocol, body)
    wires = services.upstreams[asked.model.id].wires
    planned = await plan_for_each_wire(asked.model, wires, protocol, body, request.headers, len(asked.raw_body))
    exchange, prompt_tokens = planned.exchange, planned.prompt_tokens
    record = current_record()
    billed = BilledRequest(
        principal=asked.principal,
        model=asked.model,
        protocol=protocol,
        upstream_wire=exchange.wire,
        endpoint=ENDPOINTS[protocol],
        stream=exchange.stream,
        request_id=request_id_of(record),
        idempotency=idempotency_of(request, asked.raw_body),
        attribution=attribution,
        prompt_tokens=prompt_tokens,
        output=asked.output,
        record=record,
    )
    call = await _held_within_balance(services, request, billed, exchange)
    if not isinstance(call, BilledCall):
        return call  # the stored answer of the request served before under this Idempotency-Key
    if model_limit is not None:  # unless the balance lowered it further
        call.headers.setdefault(CLAMPED_HEADER, str(model_limit))
    if protocol == "messages":
        call.headers["request-id"] = call.bill.request_id
    if exchange.dropped_tools:  # the client's own words: each name percent-encoded, so any text can go in a header
        call.headers[DROPPED_HEADER] = ", ".join(header_text(name) for name in exchange.dropped_tools)
        if call.bill.record is not None:
            call.bill.record.dropped_tools = list(exchange.dropped_tools)
    return await answer(call)


async def _held_within_balance(
    services: BillingServices, request: Request[Any, Any, Any], billed: BilledRequest, exchange: Exchange
) -> GenerationCall | Response[bytes]:
    """The request held at its worst case. One the balance cannot cover is refused saying the largest
    output limit it covers, or, for a key that opted in (``clamp_output_to_balance``), held and sent
    with its output limit lowered to that, which the answer's ``x-tollgate-output-clamped`` says."""
    billing, principal, model = services.billing, billed.principal, billed.model
    prompt_tokens, output = billed.prompt_tokens, billed.output
    exposure = widest_exposure(exchange)

    async def held_for(most: int) -> GenerationCall | Response[bytes]:
        size = HoldSize(
            worst_case=billing.worst_case(principal, model, prompt_tokens, most, exposure),
            admitted_tokens=prompt_tokens + min(output.requested, most),
        )
        return await hold(services, request, billed, exchange, size)

    try:
        return await held_for(output.most)
    except InsufficientCreditsError as short:
        per_choice = (
            billing.affordable(principal, model, prompt_tokens, output.most, exposure, short.available)
            // output.choices
        )
        if not principal.clamp_output or per_choice < MIN_CLAMPED_OUTPUT:
            raise short.affording(per_choice, OUTPUT_FIELDS[billed.protocol]) from None
    for planned in (exchange, *exchange.alternatives.values()):
        planned.body = clamp_output(planned.body, planned.wire, per_choice)
    try:
        call = await held_for(per_choice * output.choices)
    except InsufficientCreditsError as short:  # spent meanwhile by the team's other requests
        raise short.affording(0, OUTPUT_FIELDS[billed.protocol]) from None
    if isinstance(call, BilledCall):
        call.headers[CLAMPED_HEADER] = str(per_choice)
    return call


async def answer(call: GenerationCall) -> Response[bytes] | EventStream:
    """The held call's answer, streamed or plain as the client asked; settled whatever happens."""
    if call.exchange.stream:
        return await _streamed(call)
    return await _answered(call)


async def _answered(call: GenerationCall) -> Response[bytes]:
    """A plain request: the upstream's whole answer, decoded, charged, and rendered with its cost."""
    async with call:
        call.seal()
        raw = await call.complete(call.exchange.planned())
        exchange = call.exchange = call.exchange.answered_on(call.served_wire)
        resp = exchange.decode(raw)
        usage = resp.usage
        if usage is None:  # the upstream did not say: bill what it answered, counted here
            c.deliver_answer(resp.parts, call.delivered)
            usage = resp.usage = call.delivered.usage()
        body = await call.charge(usage, lambda fields: exchange.render(raw, resp, fields))
    return Response(body, headers=call.headers, media_type="application/json")


async def _streamed(call: GenerationCall) -> EventStream:
    """Start the relay before answering: the upstream's refusal to open the stream is then an
    ordinary error answer, and a started generator is always closed (by the fast path once the answer
    ended, ``app/http/hot_paths.py``; by the event loop's finalizer if nobody iterates it, e.g. the
    client left before the headers), so its call is always settled, whereas one that never started
    would never leave its ``async with``."""
    relay = _relay(call)
    if call.transcript is not None:
        relay = _recorded(relay, call.transcript)
    first = await relay.__anext__()
    if call.exchange.stream_type != EVENT_STREAM:  # Gemini's stream without alt=sse: one JSON array
        call.headers["content-type"] = f"{call.exchange.stream_type}; charset=utf-8"
    return EventStream(first, relay, headers=call.headers)


async def _relay(call: GenerationCall) -> AsyncGenerator[bytes, None]:
    """Relay the upstream's events as the client's frames, as they come, through the exchange's
    stream relay (``app/translate/stream_relay.py``); charge before the final frames, which carry the
    cost. What one read of the upstream brought goes out together, in one write. What the client was
    sent is noted once its frames have gone out (the generator resumed after them), so a stream that
    ends early — the client hung up, or was cut off for reading nothing (``write_timeout``) — is
    billed for exactly that."""
    async with call:
        call.seal(SSE_HEADERS)
        stream = await call.open_stream(call.exchange.planned())
        call.exchange = call.exchange.answered_on(call.served_wire)
        relay = call.exchange.relay()
        start = relay.start()
        if start:
            yield b"".join(start)
        delivered = call.delivered
        reported = _Reported()
        try:
            async for batch in stream:
                frames, events, failure = relay.relay(batch)
                content = reported.content(events, delivered)
                if frames:
                    yield frames[0] if len(frames) == 1 else b"".join(frames)
                for event in content:
                    c.deliver(event, delivered)
                if failure is not None:
                    raise failure
        except GatewayError as exc:
            # The upstream failed after the stream began: bill what was delivered, then say so in-stream.
            await call.settle_partial(exc)
            yield await call.last_frames(b"".join(relay.error(exc)))
            return
        charged, reasoning = reported.usage or delivered.usage(), reported.reasoning
        try:
            final = await call.charge_stream(
                charged, lambda extra: relay.finish(charged, reasoning, extra), call.exchange.stream_type
            )
        except GatewayError as exc:  # the hold stays open and visible; the client is told nothing was billed
            yield await call.last_frames(b"".join(relay.error(exc)))
            return
        yield await call.last_frames(final)


class _Reported:
    """What the upstream said a stream used: its final count once it gave one; its partial counts
    (Anthropic's input tokens at the start) go to what was delivered, the bill of an early end."""

    __slots__ = ("reasoning", "usage")

    def __init__(self) -> None:
        self.usage: TokenUsage | None = None
        self.reasoning = 0

    def content(self, events: list[c.Event], delivered: Delivered) -> list[c.Event]:
        """The events that are the answer's content, the usage reports taken out and noted."""
        content: list[c.Event] = []
        for event in events:
            if isinstance(event, c.UsageReported):
                delivered.reported = event.usage
                if not event.partial:
                    self.usage, self.reasoning = event.usage, event.reasoning_tokens
            else:
                content.append(event)
        return content


async def _recorded(relay: AsyncGenerator[bytes, None], transcript: list[bytes]) -> AsyncGenerator[bytes, None]:
    """The frames an idempotent stream handed on, kept to be stored with its charge."""
    try:
        async for frame in relay:
            transcript.append(frame)
            yield frame
    finally:
        await relay.aclose()  # closing this closes the relay (which settles its call)
