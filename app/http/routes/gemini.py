"""Google's Gemini API in front of Tollgate: ``POST /v1beta/models/{model}:generateContent``,
``:streamGenerateContent`` (``?alt=sse``: Server-Sent Events; without it a JSON array, as Google
serves both) and ``:countTokens``, billed to the caller's team; also under ``/v1/``.

The model is in the URL (``models/ID``), so one route takes every ``POST`` under the prefix and reads
the method after the model's last colon (an id may hold colons: ``…-v1:0``). The key comes as
``x-goog-api-key``, as ``?key=`` or as a Bearer token. A request goes through the billed path of the
other generation endpoints (``app/http/relay.py``): translated for the model's upstream, held at its
worst case, charged once. Errors use Google's shape (docs/api.md, "Gemini"). The model list
(``GET /v1beta/models``) is ``app/http/routes/gemini_models.py``.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, post
from litestar.response import Stream

from app.errors import AuthenticationFailed, InvalidRequest, NotFound
from app.http.billed_request import Generation, OutputAsk
from app.http.prompt_size import count_prompt
from app.http.relay import serve
from app.http.routes.auth import authenticate, authorize, google_key
from app.http.routes.request_body import check_output_limit, check_positive, read_json_object
from app.http.routes.request_counts import check_counts
from app.http.routes.served import served_model
from app.json import encode
from app.observability.record import current_record
from app.runtime import Runtime
from app.translate import fields as f
from app.translate.gemini.names import camel_body
from domain import endpoints

ENDPOINT = endpoints.GENERATE_CONTENT
GEMINI_METHODS = endpoints.GEMINI_METHODS
GENERATE, STREAM, COUNT = GEMINI_METHODS
gemini_target = endpoints.gemini_call


def speaks_gemini(path: str) -> bool:
    """Whether a path is the Gemini API's, answered (errors too) in Google's shapes."""
    return path.startswith("/v1beta/") or gemini_target(path) is not None


@post("/v1beta/models/{name:path}", status_code=200)
async def gemini_models_post(request: Request[Any, Any, Any]) -> Response[bytes] | Stream:
    """Every ``POST`` under the Gemini prefixes; also the fast path's (``app/http/hot_paths.py``),
    which sets no path parameters: the path is read here."""
    target = gemini_target(request.scope["path"])
    if target is None:
        raise NotFound(
            f"Unknown request URL {request.scope['path']}: expected models/MODEL:{' or :'.join(GEMINI_METHODS)}."
        )
    model_id, method = target
    runtime: Runtime = request.app.state.runtime
    key = google_key(request)
    if key is None:
        raise AuthenticationFailed(
            "You didn't provide an API key. Send it in the x-goog-api-key header, as ?key=, or as 'Bearer YOUR_KEY'."
        )
    principal = await authenticate(request, runtime, key)
    raw = await request.body()
    body = camel_body(read_json_object(raw, runtime.settings.max_json_depth))
    record = current_record()
    if record is not None:
        record.stream = method == STREAM
    if method == COUNT:
        inner = f.typed(body.get("generateContentRequest"), dict, "generateContentRequest")
        body = inner if inner is not None else body
    check_counts(body, "gemini", runtime.settings)
    model = served_model(runtime.settings, model_id, ENDPOINT)
    authorize(principal, model.id, ENDPOINT)
    contents = f.typed(body.get("contents"), list, "contents")
    if not contents:
        raise InvalidRequest("contents: expected at least one content.", param="contents")
    if method == COUNT:
        admission = await runtime.limiter.admit(principal, None)
        request.state.rate_limit_headers = admission.headers  # sent with any error from here on
        size = await count_prompt(model, runtime.upstreams[model.id].wire, body, "gemini", len(raw))
        return Response(encode({"totalTokens": size.tokens}), media_type="application/json", headers=admission.headers)
    config = f.typed(body.get("generationConfig"), dict, "generationConfig") or {}
    asked = f.typed(config.get("maxOutputTokens"), int, "generationConfig.maxOutputTokens")
    check_positive(asked, "generationConfig.maxOutputTokens")
    limit = check_output_limit(asked, model, "generationConfig.maxOutputTokens")
    output = OutputAsk(
        most=limit or model.max_output_tokens,
        requested=limit or 0,
        model_limit=limit if limit != asked else None,
    )
    # What the URL says goes in the body, as the billed path reads every wire's (a client's own
    # ``model``, ``stream`` or ``alt`` fields are not Gemini's, and are replaced).
    alt = "sse" if request.query_params.get("alt") == "sse" else "json"
    body = {**body, "model": model.id, "stream": method == STREAM, "alt": alt}
    return await serve(runtime, request, Generation(principal, model, "gemini", body, raw, output))
