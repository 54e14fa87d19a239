"""The billed request, shared by every endpoint: hold, call the upstream, charge, answer.

Endpoints differ only in how they parse a request and write an answer (their codec); the money
moves the same way for all of them. For a stream, the charge is durable before the final frame that
reports it, and a stream that ends early is billed for what was delivered, or released.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import anyio
from litestar import Response
from litestar.response import Stream

from app.billing import RequestBill, estimated_usage
from app.errors import GatewayError, InvalidRequest
from app.json import encode
from app.runtime import Runtime
from app.translate import canonical as c
from app.upstream import canonical as upstream_calls
from domain.pricing import TokenUsage
from domain.settings import Model

SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


class StreamWriter(Protocol):
    def start(self) -> list[bytes]: ...
    def event(self, event: c.Event) -> list[bytes]: ...
    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]: ...
    def error(self, exc: GatewayError) -> list[bytes]: ...


def prepare(req: c.Request, model: Model) -> c.Request:
    """Fit a canonical request to the model: its effort levels, its image support."""
    if req.has_images and not model.vision:
        raise InvalidRequest(f"The model `{model.id}` does not support images.", param="messages")
    req.effort = c.effort_for_model(req.effort, [level.value for level in model.effort_levels])
    return req


async def serve_translated(
    runtime: Runtime,
    bill: RequestBill,
    req: c.Request,
    prompt_bound: int,
    render: Callable[[c.Response, dict[str, Any]], dict[str, Any]],
    writer: Callable[[], StreamWriter],
    headers: dict[str, str],
    upstream_headers: dict[str, str] | None = None,
) -> Response[bytes] | Stream:
    upstream = runtime.upstreams[bill.model.id]
    if not req.stream:
        try:
            answer = await upstream_calls.complete(upstream, req, bill.model, upstream_headers)
        except BaseException:
            await runtime.billing.release(bill, "upstream failed")
            raise
        if answer.usage is None:
            answer.usage = estimated_usage(prompt_bound, sum(len(p.text.encode()) if isinstance(p, c.Text | c.Thinking)
                                                             else len(p.arguments.encode()) for p in answer.parts))
        charge = await runtime.billing.charge(bill, answer.usage)
        return Response(encode(render(answer, charge.usage_fields())), headers=headers, media_type="application/json")

    try:
        stream = await upstream_calls.open_stream(upstream, req, bill.model, upstream_headers)
    except BaseException:
        await runtime.billing.release(bill, "upstream failed")
        raise
    relay = _relay(runtime, bill, stream, writer(), prompt_bound)
    return await start_stream(relay, headers)


async def start_stream(relay: AsyncIterator[bytes], headers: dict[str, str]) -> Stream:
    """Start the relay before answering: a started generator is always closed (by the event loop's
    finalizer if nobody iterates it, e.g. the client left before the headers), so its hold is
    always settled, whereas one that never started would never run its ``finally``."""
    first = await relay.__anext__()  # type: ignore[attr-defined]
    return Stream(_prepend(first, relay), media_type="text/event-stream", headers={**headers, **SSE_HEADERS})


async def _prepend(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for frame in rest:
        yield frame


async def _relay(
    runtime: Runtime, bill: RequestBill, stream: upstream_calls.CanonicalStream, writer: StreamWriter, prompt_bound: int
) -> AsyncIterator[bytes]:
    usage: TokenUsage | None = None
    reasoning = 0
    delivered = 0
    settled = False
    try:
        for frame in writer.start():
            yield frame
        try:
            async for event in stream:
                if isinstance(event, c.UsageReported):
                    usage, reasoning = event.usage, event.reasoning_tokens
                    continue
                delivered += c.delivered_bytes(event)
                for frame in writer.event(event):
                    yield frame
        except GatewayError as exc:
            # The upstream failed after the stream began: bill what was delivered, then say so in-stream.
            await settle_partial(runtime, bill, prompt_bound, delivered)
            settled = True
            for frame in writer.error(exc):
                yield frame
            return
        usage = usage or estimated_usage(prompt_bound, delivered)
        try:
            charge = await runtime.billing.charge(bill, usage)
        except GatewayError as exc:
            settled = True  # the hold stays open and visible; the client is told nothing was billed
            for frame in writer.error(exc):
                yield frame
            return
        settled = True
        for frame in writer.finish(usage, reasoning, charge.usage_fields()):
            yield frame
    finally:
        if not settled:
            settle_soon(runtime, bill, prompt_bound, delivered)
        await close_quietly(stream)


async def settle_partial(runtime: Runtime, bill: RequestBill, prompt_bound: int, delivered: int) -> None:
    if delivered:
        await runtime.billing.charge(bill, estimated_usage(prompt_bound, delivered))
    else:
        await runtime.billing.release(bill, "upstream failed mid-stream")


def settle_soon(runtime: Runtime, bill: RequestBill, prompt_bound: int, delivered: int) -> None:
    """The client went away: bill what it was sent, or release, without waiting."""
    if delivered:
        runtime.billing.charge_soon(bill, estimated_usage(prompt_bound, delivered))
    else:
        runtime.billing.release_soon(bill, "client disconnected")


async def close_quietly(stream: Any) -> None:
    with anyio.CancelScope(shield=True):
        await stream.aclose()
