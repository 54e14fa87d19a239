"""POST /v1/messages and /v1/messages/count_tokens: Anthropic Messages, billed to the caller's team.

To an Anthropic upstream the client's body, version and beta headers pass through untouched (coding
agents depend on every field and on the upstream's own error wording); to any other upstream the
request is translated through the canonical model. Errors use the Messages shape (spec 7.2).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
from litestar import Request, Response, post
from litestar.response import Stream

from domain import endpoints
from app.billing import RequestBill
from app.errors import GatewayError, InvalidRequest, ModelNotFound
from app.json import encode
from app.keys import Principal
from app.routes.auth import authenticate, authorize
from app.routes.flow import (
    charge_stream,
    check_output_limit,
    close_quietly,
    delivery_for,
    open_bill,
    prepare,
    serve_translated,
    settle_partial,
    settle_soon,
    start_stream,
    transcript_for,
)
from app.routes.prompt_size import count_prompt, measure_prompt
from app.routes.request_body import check_positive, read_json_object, require, validate
from app.runtime import Runtime
from app.tokens.delivered import Delivered
from app.translate import canonical as c
from app.translate.messages import (
    MessagesEventReader,
    MessagesStreamWriter,
    canonical_to_message,
    message_to_canonical,
    messages_request_to_canonical,
    sse,
    usage_from_anthropic,
)
from app.upstream import RawStream
from domain.pricing import TokenUsage
from domain.settings import Model

ENDPOINT = endpoints.MESSAGES


class MessagesRequest(msgspec.Struct):
    model: str
    max_tokens: int
    messages: list[dict[str, Any]]
    stream: bool | None = None
    temperature: float | None = None
    system: str | list[dict[str, Any]] | None = None


def upstream_headers(request: Request[Any, Any, Any]) -> dict[str, str]:
    """The client's API version (``anthropic-version`` or ``compat-version``) and betas, forwarded."""
    headers = {}
    version = request.headers.get("anthropic-version") or request.headers.get("compat-version")
    if version:
        headers["anthropic-version"] = version
    if request.headers.get("anthropic-beta"):
        headers["anthropic-beta"] = request.headers["anthropic-beta"]
    return headers


async def _read(request: Request[Any, Any, Any], runtime: Runtime, *required: str) -> tuple[Principal, dict[str, Any], Model]:
    principal = await authenticate(request, runtime)
    body = read_json_object(await request.body())
    require(body, *required)
    if not isinstance(body.get("messages"), list):
        raise InvalidRequest("messages: expected an array of messages.", param="messages")
    model = runtime.settings.model(str(body["model"]))
    if model is None:
        raise ModelNotFound(str(body["model"]))
    authorize(principal, model.id, ENDPOINT)
    return principal, body, model


@post("/v1/messages", status_code=200)
async def create_message(request: Request[Any, Any, Any]) -> Response[bytes] | Stream:
    runtime: Runtime = request.app.state.runtime
    principal, body, model = await _read(request, runtime, "model", "messages", "max_tokens")
    parsed = validate(body, MessagesRequest)
    check_positive(parsed.max_tokens, "max_tokens")
    check_output_limit(parsed.max_tokens, model, "max_tokens")
    if parsed.temperature is not None and not 0 <= parsed.temperature <= 1:
        raise InvalidRequest(f"temperature: must be between 0 and 1, got {parsed.temperature}.", param="temperature")
    req = prepare(messages_request_to_canonical(body), model)

    prompt_bound = await measure_prompt(model, runtime.upstreams[model.id].wire, body, "messages",
                                        len(await request.body()))
    bill, headers, replay = await open_bill(runtime, request, principal, model, ENDPOINT, await request.body(),
                                            runtime.billing.worst_case(model, prompt_bound, parsed.max_tokens),
                                            prompt_bound + parsed.max_tokens)
    if replay is not None:
        return replay
    headers["request-id"] = bill.request_id
    upstream = runtime.upstreams[model.id]
    if upstream.wire != "messages":
        return await serve_translated(
            runtime, bill, req, prompt_bound,
            render=lambda answer, extra: canonical_to_message(answer, model.id, extra),
            writer=lambda: MessagesStreamWriter(model.id, prompt_bound),
            headers=headers,
        )

    forward = dict(body)  # the deployment that answers puts its own model name in
    extra_headers = upstream_headers(request)
    if not parsed.stream:
        try:
            answer = await upstream.complete(forward, extra_headers)
        except BaseException:
            await runtime.billing.release(bill, "upstream failed")
            raise
        usage = usage_from_anthropic(answer.get("usage"))
        if usage is None:
            delivered = delivery_for(runtime, bill, prompt_bound)
            c.deliver_answer(message_to_canonical(answer).parts, delivered)
            usage = delivered.usage()
        answer["model"] = model.id
        reported = answer.get("usage") or {}
        _, body_bytes = await runtime.billing.charge(
            bill, usage, lambda ch: encode({**answer, "usage": {**reported, **ch.usage_fields()}}))
        return Response(body_bytes, headers=headers, media_type="application/json")

    try:
        stream = await upstream.open_stream(forward, extra_headers)
    except BaseException:
        await runtime.billing.release(bill, "upstream failed")
        raise
    transcript = transcript_for(bill)
    return await start_stream(_relay(runtime, bill, stream, delivery_for(runtime, bill, prompt_bound), transcript),
                              headers, transcript)


async def _relay(runtime: Runtime, bill: RequestBill, stream: RawStream, delivered: Delivered,
                 transcript: list[bytes] | None) -> AsyncIterator[bytes]:
    """Relay the upstream's frames as they are; hold back ``message_delta`` until the charge is durable,
    then send it with the cost and the remaining balance in its usage. What the client was sent is
    noted once each frame has gone out, for a stream that ends early."""
    reader = MessagesEventReader()
    usage: TokenUsage | None = None
    final_delta: dict[str, Any] | None = None
    settled = False
    try:
        try:
            async for event in stream:
                content: list[c.Event] = []
                for seen in reader.events(event):
                    if isinstance(seen, c.UsageReported):
                        delivered.reported = seen.usage
                        if not seen.partial:
                            usage = seen.usage
                    else:
                        content.append(seen)
                kind = event.get("type")
                if kind == "message_start" and isinstance(event.get("message"), dict):
                    event["message"]["model"] = bill.model.id
                if kind == "message_delta":
                    final_delta = event
                    continue
                if kind == "message_stop":
                    break
                yield sse(event)
                for seen in content:
                    c.deliver(seen, delivered)
        except GatewayError as exc:
            await settle_partial(runtime, bill, delivered, exc)
            settled = True
            yield sse(exc.anthropic_body())
            return
        delta = final_delta or {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                "usage": {}}

        def final(extra: dict[str, Any]) -> list[bytes]:
            return [sse({**delta, "usage": {**(delta.get("usage") or {}), **extra}}), sse({"type": "message_stop"})]

        try:
            frames = await charge_stream(runtime, bill, usage or delivered.usage(), final, transcript)
        except GatewayError as exc:
            settled = True
            yield sse(exc.anthropic_body())
            return
        settled = True
        yield frames
    finally:
        if not settled:
            settle_soon(runtime, bill, delivered)
        await close_quietly(stream)


@post("/v1/messages/count_tokens", status_code=200)
async def count_tokens(request: Request[Any, Any, Any]) -> Response[bytes]:
    """The prompt's size in tokens as the gateway counts it: the count it checks the model's context
    window against and holds credits for, so a prompt whose count fits is never refused for its size
    by the gateway (for Anthropic models an over-estimate, see the README's "Token counting")."""
    runtime: Runtime = request.app.state.runtime
    _, body, model = await _read(request, runtime, "model", "messages")
    tokens = await count_prompt(model, runtime.upstreams[model.id].wire, body, "messages", len(await request.body()))
    return Response(encode({"input_tokens": tokens}), media_type="application/json")
