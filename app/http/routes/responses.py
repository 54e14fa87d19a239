"""POST /v1/responses: OpenAI Responses, billed to the caller's team.

To a Responses upstream the client's body passes through untouched (``previous_response_id``,
``store``, built-in tools and all); to a chat-completions or Anthropic upstream it is translated
through the canonical model, and the answer translated back.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, post
from litestar.response import Stream

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


class _Reasoning(msgspec.Struct):
    effort: str | None = None


class ResponsesRequest(msgspec.Struct):
    """The fields Tollgate itself must understand; every other field passes through untouched."""

    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    stream: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    tools: list[dict[str, Any]] | None = None
    reasoning: _Reasoning | None = None


@post("/v1/responses", status_code=200)
async def create_response(request: Request[Any, Any, Any]) -> Response[bytes] | Stream:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    raw = await request.body()
    body = read_json_object(raw, runtime.settings.max_json_depth)
    note_stream(body)
    check_counts(body, "responses", runtime.settings)
    require(body, "model", "input")
    parsed = validate(body, ResponsesRequest)
    check_positive(parsed.max_output_tokens, "max_output_tokens")
    model = served_model(runtime.settings, parsed.model, endpoints.RESPONSES)
    authorize(principal, model.id, endpoints.RESPONSES)
    max_output = check_output_limit(parsed.max_output_tokens, model, "max_output_tokens")
    output = OutputAsk(
        most=max_output or model.max_output_tokens,
        requested=max_output or 0,
        model_limit=max_output if max_output != parsed.max_output_tokens else None,
    )
    return await serve(runtime, request, Generation(principal, model, "responses", body, raw, output))
