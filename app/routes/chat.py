"""POST /v1/chat/completions: OpenAI Chat Completions, billed to the caller's team.

The path of a request: authenticate → parse and validate → find the model → hold the worst-case
cost → forward (the client's body, with the upstream's model name) → charge the actual cost → answer
with ``usage.cost`` and ``usage.remaining``. An upstream failure releases the hold: nothing charged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
from litestar import Request, Response, post
from litestar.response import Stream

from domain import endpoints
from app.billing import RequestBill
from app.translate.chat import usage_dict as openai_usage_dict
from app.translate.chat import usage_from_openai
from app.errors import GatewayError, InvalidRequest, ModelNotFound
from app.json import encode
from app.routes.auth import authenticate, authorize
from app.routes.prompt_size import measure_prompt
from app.routes.request_body import check_positive, read_json_object, require, validate
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
from app.runtime import Runtime
from app.tokens.delivered import Delivered
from app.translate.chat import ChatStreamWriter, canonical_to_chat_response, chat_request_to_canonical
from app.upstream import RawStream

ENDPOINT = endpoints.CHAT


class _Message(msgspec.Struct):
    role: str
    content: Any = None


class _StreamOptions(msgspec.Struct):
    include_usage: bool | None = None


class ChatRequest(msgspec.Struct):
    """The fields Tollgate itself must understand; every other field passes through untouched."""

    model: str
    messages: list[_Message]
    stream: bool | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    n: int | None = None
    stream_options: _StreamOptions | None = None
    tools: list[dict[str, Any]] | None = None


def parse_chat_request(raw: bytes) -> tuple[dict[str, Any], ChatRequest]:
    body = read_json_object(raw)
    require(body, "model", "messages")
    request = validate(body, ChatRequest)
    if not request.messages:
        raise InvalidRequest("'messages' must contain at least one message.", param="messages")
    if request.temperature is not None and not 0 <= request.temperature <= 2:
        raise InvalidRequest(
            f"Invalid 'temperature': expected a value between 0 and 2, but got {request.temperature} instead.",
            param="temperature",
        )
    for name in ("max_tokens", "max_completion_tokens", "n"):
        check_positive(getattr(request, name), name)
    return body, request


@post("/v1/chat/completions", status_code=200)
async def chat_completions(request: Request[Any, Any, Any]) -> Response[bytes] | Stream:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    body, chat = parse_chat_request(await request.body())
    model = runtime.settings.model(chat.model)
    if model is None:
        raise ModelNotFound(chat.model)
    authorize(principal, model.id, ENDPOINT)
    check_output_limit(chat.max_tokens, model, "max_tokens")
    check_output_limit(chat.max_completion_tokens, model, "max_completion_tokens")

    prompt_bound = await measure_prompt(model, runtime.upstreams[model.id].wire, body, "chat", len(await request.body()))
    # Every one of the ``n`` choices may use the whole output allowance.
    max_output = (chat.max_completion_tokens or chat.max_tokens or model.max_output_tokens) * (chat.n or 1)
    bill, headers, replay = await open_bill(runtime, request, principal, model, ENDPOINT, await request.body(),
                                            runtime.billing.worst_case(model, prompt_bound, max_output),
                                            prompt_bound + (chat.max_completion_tokens or chat.max_tokens or 0) * (chat.n or 1))
    if replay is not None:
        return replay
    upstream = runtime.upstreams[model.id]
    if upstream.wire != "chat":
        include_usage = bool(chat.stream_options and chat.stream_options.include_usage)
        return await serve_translated(
            runtime, bill, prepare(chat_request_to_canonical(body), model), prompt_bound,
            render=lambda answer, extra: canonical_to_chat_response(answer, model.id, extra),
            writer=lambda: ChatStreamWriter(model.id, include_usage),
            headers=headers,
        )

    # Same protocol on both sides: pass the client's body through, every parameter untouched (but
    # ``model``, which the deployment that answers replaces with its own name).
    forward = dict(body)
    if not chat.stream:
        try:
            answer = await upstream.complete(forward)
        except BaseException:
            await runtime.billing.release(bill, "upstream failed")
            raise
        return Response(await _bill_answer(runtime, bill, answer, delivery_for(runtime, bill, prompt_bound)),
                        headers=headers, media_type="application/json")

    forward["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    try:
        stream = await upstream.open_stream(forward)
    except BaseException:
        await runtime.billing.release(bill, "upstream failed")
        raise
    include_usage = bool(chat.stream_options and chat.stream_options.include_usage)
    transcript = transcript_for(bill)
    return await start_stream(_relay(runtime, bill, stream, delivery_for(runtime, bill, prompt_bound), include_usage,
                                     transcript), headers, transcript)


async def _bill_answer(runtime: Runtime, bill: RequestBill, answer: dict[str, Any], delivered: Delivered) -> bytes:
    usage = usage_from_openai(answer.get("usage"))
    reported = answer.get("usage") if usage is not None else None
    if usage is None:
        _deliver(answer.get("choices"), "message", delivered)
        usage = delivered.usage()
    answer["model"] = bill.model.id
    base_usage = reported or openai_usage_dict(usage)
    _, body = await runtime.billing.charge(
        bill, usage, lambda ch: encode({**answer, "usage": {**base_usage, **ch.usage_fields()}}))
    return body


def _deliver(choices: Any, key: str, delivered: Delivered) -> None:
    """Note the text, reasoning and tool calls in ``choices[*][key]`` (message or delta), each choice
    and each tool call its own sequence."""
    for position, choice in enumerate(choices or ()):
        part = choice.get(key) if isinstance(choice, dict) else None
        if not isinstance(part, dict):
            continue
        index = choice.get("index", position)
        if isinstance(part.get("content"), str):
            delivered.add(("text", index), part["content"])
        reasoning = part.get("reasoning_content") or part.get("reasoning")
        if isinstance(reasoning, str):
            delivered.add(("thinking", index), reasoning)
        for number, call in enumerate(part.get("tool_calls") or ()):
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                call_index = call.get("index", number)
                delivered.add(("tool", index, call_index), str(function.get("name") or ""))
                delivered.add(("arguments", index, call_index), str(function.get("arguments") or ""))


def _frame(obj: Any) -> bytes:
    return b"data: " + encode(obj) + b"\n\n"


async def _relay(
    runtime: Runtime, bill: RequestBill, stream: RawStream, delivered: Delivered, include_usage: bool,
    transcript: list[bytes] | None,
) -> AsyncIterator[bytes]:
    """Relay upstream chunks as they come; charge before the final usage chunk and ``[DONE]``. What
    the client was sent is noted once each chunk has gone out, for a stream that ends early."""
    reported: Any = None
    settled = False
    last: dict[str, Any] = {}
    try:
        try:
            async for chunk in stream:
                usage = chunk.pop("usage", None)
                if usage:
                    reported = usage
                if not chunk.get("choices"):
                    continue  # a usage-only chunk: re-sent below, with the cost, once charged
                chunk["model"] = bill.model.id
                if include_usage:
                    chunk["usage"] = None
                last = chunk
                yield _frame(chunk)
                _deliver(chunk["choices"], "delta", delivered)
        except GatewayError as exc:
            # The upstream failed after the stream began: bill what was delivered, then say so in-stream.
            await settle_partial(runtime, bill, delivered, exc)
            settled = True
            yield _frame(exc.openai_body())
            return
        usage = usage_from_openai(reported)
        if usage is None:
            reported, usage = None, delivered.usage()
        def final(extra: dict[str, Any]) -> list[bytes]:
            if not include_usage:
                return [b"data: [DONE]\n\n"]
            chunk = {"id": last.get("id"), "object": "chat.completion.chunk", "created": last.get("created"),
                     "model": bill.model.id, "choices": [], "usage": {**(reported or openai_usage_dict(usage)), **extra}}
            if "system_fingerprint" in last:
                chunk["system_fingerprint"] = last["system_fingerprint"]
            return [_frame(chunk), b"data: [DONE]\n\n"]

        try:
            frames = await charge_stream(runtime, bill, usage, final, transcript)
        except GatewayError as exc:
            settled = True  # the hold stays open and visible; the client is told nothing was billed
            yield _frame(exc.openai_body())
            return
        settled = True
        yield frames
    finally:
        if not settled:
            settle_soon(runtime, bill, delivered)
        await close_quietly(stream)
