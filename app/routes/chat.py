"""POST /v1/chat/completions: OpenAI Chat Completions, billed to the caller's team.

The path of a request: authenticate → parse and validate → find the model → hold the worst-case
cost → forward (the client's body, with the upstream's model name) → charge the actual cost → answer
with ``usage.cost`` and ``usage.remaining``. An upstream failure releases the hold: nothing charged.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
from litestar import Request, Response, post
from litestar.response import Stream

from app.billing import (
    RequestBill,
    estimated_usage,
    openai_usage_dict,
    prompt_token_bound,
    usage_from_openai,
)
from app.errors import GatewayError, InvalidRequest, ModelNotFound
from app.json import decode, encode
from app.routes.auth import authenticate
from app.runtime import Runtime
from app.upstream import ChatStream

ENDPOINT = "chat.completions"


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
    try:
        body = decode(raw)
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"We could not parse the JSON body of your request: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    for name in ("model", "messages"):
        if name not in body or body[name] is None:
            raise InvalidRequest(f"Missing required parameter: '{name}'.", param=name)
    try:
        request = msgspec.convert(body, ChatRequest)
    except msgspec.ValidationError as exc:
        raise _invalid(str(exc)) from None
    if not request.messages:
        raise InvalidRequest("'messages' must contain at least one message.", param="messages")
    if request.temperature is not None and not 0 <= request.temperature <= 2:
        raise InvalidRequest(
            f"Invalid 'temperature': expected a value between 0 and 2, but got {request.temperature} instead.",
            param="temperature",
        )
    for name in ("max_tokens", "max_completion_tokens", "n"):
        value = getattr(request, name)
        if value is not None and value < 1:
            raise InvalidRequest(f"Invalid '{name}': expected a value >= 1, but got {value} instead.", param=name)
    return body, request


def _invalid(message: str) -> InvalidRequest:
    problem, _, where = message.partition(" - at `$")
    param = where.rstrip("`").lstrip(".") or None
    text = f"Invalid value for '{param}': {problem}." if param else f"Invalid request: {problem}."
    return InvalidRequest(text, param=param)


@post("/v1/chat/completions", status_code=200)
async def chat_completions(request: Request[Any, Any, Any]) -> Response[bytes] | Stream:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    body, chat = parse_chat_request(await request.body())
    model = runtime.settings.model(chat.model)
    if model is None:
        raise ModelNotFound(chat.model)

    request_id = "req_" + secrets.token_hex(12)
    bill = RequestBill(principal, model, request_id, ENDPOINT)
    prompt_bound = prompt_token_bound(body)
    # Every one of the ``n`` choices may use the whole output allowance.
    max_output = (chat.max_completion_tokens or chat.max_tokens or model.max_output_tokens) * (chat.n or 1)
    await runtime.billing.hold(bill, runtime.billing.worst_case(model, prompt_bound, max_output))

    headers = {"x-request-id": request_id}
    forward = {**body, "model": model.upstream_model}
    upstream = runtime.upstreams[model.id]
    if not chat.stream:
        try:
            answer = await upstream.complete(forward)
        except BaseException:
            await runtime.billing.release(bill, "upstream failed")
            raise
        return Response(encode(await _bill_answer(runtime, bill, answer, prompt_bound)), headers=headers,
                        media_type="application/json")

    forward["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    try:
        stream = await upstream.open_stream(forward)
    except BaseException:
        await runtime.billing.release(bill, "upstream failed")
        raise
    include_usage = bool(chat.stream_options and chat.stream_options.include_usage)
    relay = _relay(runtime, bill, stream, prompt_bound, include_usage)
    # Start the relay here: a started generator is always closed (by the event loop's finalizer
    # if nobody iterates it, e.g. the client left before the headers), so its hold is always settled.
    first = await relay.__anext__()
    return Stream(
        _prepend(first, relay),
        media_type="text/event-stream",
        headers={**headers, "cache-control": "no-cache", "x-accel-buffering": "no"},
    )


async def _bill_answer(runtime: Runtime, bill: RequestBill, answer: dict[str, Any], prompt_bound: int) -> dict[str, Any]:
    usage = usage_from_openai(answer.get("usage"))
    reported = answer.get("usage") if usage is not None else None
    if usage is None:
        usage = estimated_usage(prompt_bound, _delivered_bytes(answer.get("choices"), "message"))
    charge = await runtime.billing.charge(bill, usage)
    answer["model"] = bill.model.id
    answer["usage"] = {**(reported or openai_usage_dict(usage)), **charge.usage_fields()}
    return answer


def _delivered_bytes(choices: Any, key: str) -> int:
    """UTF-8 bytes of text and tool-call arguments in ``choices[*][key]`` (message or delta)."""
    total = 0
    for choice in choices or ():
        part = choice.get(key) if isinstance(choice, dict) else None
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("content"), str):
            total += len(part["content"].encode())
        for call in part.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                total += len(str(function.get("name") or "").encode()) + len(str(function.get("arguments") or "").encode())
    return total


async def _prepend(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for frame in rest:
        yield frame


def _frame(obj: Any) -> bytes:
    return b"data: " + encode(obj) + b"\n\n"


async def _relay(
    runtime: Runtime, bill: RequestBill, stream: ChatStream, prompt_bound: int, include_usage: bool
) -> AsyncIterator[bytes]:
    """Relay upstream chunks as they come; charge before the final usage chunk and ``[DONE]``."""
    reported: Any = None
    delivered = 0
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
                delivered += _delivered_bytes(chunk["choices"], "delta")
                yield _frame(chunk)
        except GatewayError as exc:
            # The upstream failed after the stream began: bill what was delivered, then say so in-stream.
            if delivered:
                await runtime.billing.charge(bill, estimated_usage(prompt_bound, delivered))
            else:
                await runtime.billing.release(bill, "upstream failed mid-stream")
            settled = True
            yield _frame(exc.openai_body())
            return
        usage = usage_from_openai(reported)
        if usage is None:
            reported, usage = None, estimated_usage(prompt_bound, delivered)
        try:
            charge = await runtime.billing.charge(bill, usage)
        except GatewayError as exc:
            settled = True  # the hold stays open and visible; the client is told nothing was billed
            yield _frame(exc.openai_body())
            return
        settled = True
        if include_usage:
            final = {
                "id": last.get("id"),
                "object": "chat.completion.chunk",
                "created": last.get("created"),
                "model": bill.model.id,
                "choices": [],
                "usage": {**(reported or openai_usage_dict(usage)), **charge.usage_fields()},
            }
            if "system_fingerprint" in last:
                final["system_fingerprint"] = last["system_fingerprint"]
            yield _frame(final)
        yield b"data: [DONE]\n\n"
    finally:
        if not settled:
            # The client went away (or the charge itself failed): bill what it was sent, or release.
            if delivered:
                runtime.billing.charge_soon(bill, estimated_usage(prompt_bound, delivered))
            else:
                runtime.billing.release_soon(bill, "client disconnected")
        with anyio.CancelScope(shield=True):
            await stream.aclose()
