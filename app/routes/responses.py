"""POST /v1/responses: OpenAI Responses, billed to the caller's team.

No upstream speaks Responses, so every request is translated through the canonical model to the
model's upstream (chat completions or Anthropic messages) and the answer translated back.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, post
from litestar.response import Stream

from domain import endpoints
from app.errors import ModelNotFound
from app.routes.auth import authenticate, authorize
from app.routes.flow import check_output_limit, open_bill, prepare, serve_translated
from app.routes.prompt_size import measure_prompt
from app.routes.request_body import check_positive, read_json_object, require, validate
from app.runtime import Runtime
from app.translate.responses import (
    ResponseShell,
    ResponsesStreamWriter,
    canonical_to_response,
    responses_request_to_canonical,
)

ENDPOINT = endpoints.RESPONSES


class _Reasoning(msgspec.Struct):
    effort: str | None = None


class ResponsesRequest(msgspec.Struct):
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
    body = read_json_object(await request.body())
    require(body, "model", "input")
    parsed = validate(body, ResponsesRequest)
    check_positive(parsed.max_output_tokens, "max_output_tokens")
    model = runtime.settings.model(parsed.model)
    if model is None:
        raise ModelNotFound(parsed.model)
    authorize(principal, model.id, ENDPOINT)
    check_output_limit(parsed.max_output_tokens, model, "max_output_tokens")
    req = prepare(responses_request_to_canonical(body), model)

    prompt_bound = await measure_prompt(model, runtime.upstreams[model.id].wire, body, "responses",
                                        len(await request.body()))
    max_output = parsed.max_output_tokens or model.max_output_tokens
    bill, headers, replay = await open_bill(runtime, request, principal, model, ENDPOINT, await request.body(),
                                            runtime.billing.worst_case(model, prompt_bound, max_output),
                                            prompt_bound + (parsed.max_output_tokens or 0))
    if replay is not None:
        return replay
    shell = ResponseShell(body, model.id)
    return await serve_translated(
        runtime, bill, req, prompt_bound,
        render=lambda answer, extra: canonical_to_response(answer, shell, extra),
        writer=lambda: ResponsesStreamWriter(shell),
        headers=headers,
    )
