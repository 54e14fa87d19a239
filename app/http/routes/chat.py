"""POST /v1/chat/completions: OpenAI Chat Completions, billed to the caller's team.

The path of a request: authenticate → parse the fields Tollgate reads → find the model → the
billed call (``app/http/relay.py``): size the prompt, plan what goes upstream (the body as it came,
to a chat upstream; translated, to any other), hold the worst case, call, charge, answer with
``usage.cost`` and ``usage.remaining``.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, post
from litestar.response import Stream

from app.errors import InvalidRequest
from app.http.billed_request import Generation, OutputAsk
from app.http.relay import serve
from app.http.routes.auth import authenticate, authorize
from app.http.routes.request_body import (
    check_output_limit,
    check_positive,
    note_stream,
    read_json_object,
    require,
    validate,
)
from app.http.routes.request_counts import check_counts
from app.http.routes.served import served_model
from app.runtime import Runtime
from domain import endpoints
from domain.settings import Settings


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


def parse_chat_request(raw: bytes, settings: Settings) -> tuple[dict[str, Any], ChatRequest]:
    body = read_json_object(raw, settings.max_json_depth)
    note_stream(body)
    check_counts(body, "chat", settings)
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
    raw = await request.body()
    body, chat = parse_chat_request(raw, runtime.settings)
    model = served_model(runtime.settings, chat.model, endpoints.CHAT)
    authorize(principal, model.id, endpoints.CHAT)
    limits = (
        check_output_limit(chat.max_tokens, model, "max_tokens"),
        check_output_limit(chat.max_completion_tokens, model, "max_completion_tokens"),
    )
    clamped = limits != (chat.max_tokens, chat.max_completion_tokens)
    requested = limits[1] or limits[0]
    choices = chat.n or 1  # every choice may use the whole output allowance
    output = OutputAsk(
        most=(requested or model.max_output_tokens) * choices,
        requested=(requested or 0) * choices,
        choices=choices,
        model_limit=model.max_output_tokens if clamped else None,
    )
    return await serve(runtime, request, Generation(principal, model, "chat", body, raw, output))
