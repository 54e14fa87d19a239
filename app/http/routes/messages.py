"""POST /v1/messages and /v1/messages/count_tokens: Anthropic Messages, billed to the caller's team.

To an Anthropic upstream the client's body, version and beta headers pass through untouched (coding
agents depend on every field — system turns, adaptive thinking, context management, server tools —
and on the upstream's own error wording); to any other upstream the request is translated through
the canonical model. Errors use the Messages shape (README, "API": errors).
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, post
from litestar.response import Stream

from app.errors import InvalidRequest
from app.http.billed_request import Generation, OutputAsk
from app.http.prompt_size import count_prompt
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
from app.json import encode
from app.keys import Principal
from app.runtime import Runtime
from domain import endpoints
from domain.settings import Model

ENDPOINT = endpoints.MESSAGES


class MessagesRequest(msgspec.Struct):
    model: str
    max_tokens: int
    messages: list[dict[str, Any]]
    stream: bool | None = None
    temperature: float | None = None
    system: str | list[dict[str, Any]] | None = None


async def _read(
    request: Request[Any, Any, Any], runtime: Runtime, *required: str
) -> tuple[Principal, dict[str, Any], Model]:
    principal = await authenticate(request, runtime)
    body = read_json_object(await request.body(), runtime.settings.max_json_depth)
    note_stream(body)
    check_counts(body, "messages", runtime.settings)
    require(body, *required)
    if not isinstance(body.get("messages"), list):
        raise InvalidRequest("messages: expected an array of messages.", param="messages")
    model = served_model(runtime.settings, str(body["model"]), ENDPOINT)
    authorize(principal, model.id, ENDPOINT)
    return principal, body, model


@post("/v1/messages", status_code=200)
async def create_message(request: Request[Any, Any, Any]) -> Response[bytes] | Stream:
    runtime: Runtime = request.app.state.runtime
    principal, body, model = await _read(request, runtime, "model", "messages", "max_tokens")
    parsed = validate(body, MessagesRequest)
    check_positive(parsed.max_tokens, "max_tokens")
    max_tokens = check_output_limit(parsed.max_tokens, model, "max_tokens") or parsed.max_tokens
    if parsed.temperature is not None and not 0 <= parsed.temperature <= 1:
        raise InvalidRequest(f"temperature: must be between 0 and 1, got {parsed.temperature}.", param="temperature")
    output = OutputAsk(
        most=max_tokens, requested=max_tokens, model_limit=max_tokens if max_tokens != parsed.max_tokens else None
    )
    return await serve(runtime, request, Generation(principal, model, "messages", body, await request.body(), output))


@post("/v1/messages/count_tokens", status_code=200)
async def count_tokens(request: Request[Any, Any, Any]) -> Response[bytes]:
    """The prompt's size in tokens as the gateway counts it: the count it checks the model's context
    window against and holds credits for, so a prompt whose count fits is never refused for its size
    by the gateway (for Anthropic models an over-estimate, see the README's "Token counting").

    Counting costs CPU (a large prompt, a good part of a second), so each call is one request against
    the key's and the team's rpm limits, admitted before the count (429 when over). It uses no
    output and generates nothing, so it takes nothing from the tpm limits: an agent that sizes its
    prompt before sending it is not charged its tokens twice."""
    runtime: Runtime = request.app.state.runtime
    principal, body, model = await _read(request, runtime, "model", "messages")
    admission = await runtime.limiter.admit(principal, None)
    request.state.rate_limit_headers = admission.headers  # sent with any error from here on
    size = await count_prompt(model, runtime.upstreams[model.id].wire, body, "messages", len(await request.body()))
    return Response(encode({"input_tokens": size.tokens}), media_type="application/json", headers=admission.headers)
