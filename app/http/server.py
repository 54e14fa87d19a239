"""The Litestar application: routes, and the one place errors become response bodies."""

from __future__ import annotations

import logging
import time
from importlib import metadata
from typing import Any

from litestar import Litestar, Request, Response
from litestar.exceptions import HTTPException

from app.errors import GatewayError, InvalidRequest, NotFound, RequestTooLarge
from app.http.dashboard import dashboard_router
from app.http.hot_paths import HotPaths
from app.http.interpreter import settle_interpreter
from app.http.openapi import openapi_config
from app.http.request_guard import RequestGuard, with_head
from app.http.routes.admin import admin_router
from app.http.routes.audio import create_speech, create_transcription, create_translation
from app.http.routes.auto_recharge import team_recharge_handlers
from app.http.routes.batches import cancel_batch, create_batch, list_batches, retrieve_batch
from app.http.routes.chat import chat_completions
from app.http.routes.credits import read_credits, read_key
from app.http.routes.embeddings import create_embeddings
from app.http.routes.files import delete_file, file_content, list_files, retrieve_file, upload_file
from app.http.routes.gemini import gemini_models_post, gemini_target, speaks_gemini
from app.http.routes.gemini_models import gemini_list_models, gemini_read_model, speaks_google
from app.http.routes.health import live, ready
from app.http.routes.image_edits import edit_image
from app.http.routes.images import create_image
from app.http.routes.ledger_log import log_handlers
from app.http.routes.message_batches import (
    cancel_message_batch,
    create_message_batch,
    list_message_batches,
    message_batch_results,
    retrieve_message_batch,
)
from app.http.routes.messages import count_tokens, create_message
from app.http.routes.metrics import metrics
from app.http.routes.models import ModelListCache, list_models, read_model, speaks_anthropic
from app.http.routes.payments import create_checkout, stripe_webhook
from app.http.routes.requests import read_request
from app.http.routes.responses import create_response
from app.json import encode
from app.observability.access import Observed
from app.observability.record import current_record
from app.runtime import Runtime
from app.tokens.encoding import warm_up

log = logging.getLogger("tollgate")


def _error_response(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response[bytes]:
    return Response(encode(body), status_code=status, media_type="application/json", headers=headers)


def _speaks_messages(request: Request[Any, Any, Any]) -> bool:
    """The Messages endpoints answer errors in their own shape (docs/api.md, "Errors"), and so do the
    model routes for a client of Anthropic's (``anthropic-version``); the others in OpenAI's."""
    path = request.url.path
    return path.startswith("/v1/messages") or (path.startswith("/v1/models") and speaks_anthropic(request))


def _gateway_error(request: Request[Any, Any, Any], exc: GatewayError) -> Response[bytes]:
    record = current_record()
    if record is not None:
        record.failed(exc.message)
    rate_limits = request.state.get("rate_limit_headers") or {}  # set once the request was admitted
    headers = {**rate_limits, **exc.response_headers()}
    relayed = exc.relayed_answer()
    if relayed is not None:  # passed through: the upstream's own words (coding agents match on them)
        return Response(relayed[1], status_code=relayed[0], media_type="application/json", headers=headers)
    path = request.url.path
    if speaks_gemini(path) or (path.startswith("/v1/models") and speaks_google(request)):
        body = exc.gemini_body()
    else:
        body = exc.anthropic_body() if _speaks_messages(request) else exc.openai_body()
    return _error_response(exc.status, body, headers)


def _http_exception(request: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    """Litestar's own refusals (an unknown route, a method, a path or query parameter of the wrong
    type), in the endpoint's error shape like every other error; a parameter's problem names it."""
    status = exc.status_code
    if status == 413:  # Litestar's own check of max_request_bytes, before reading past it
        limit = request.app.state.runtime.settings.max_request_bytes
        return _gateway_error(
            request,
            RequestTooLarge(
                f"The request body is larger than this gateway takes: at most {limit} bytes.",
                headers={"connection": "close"},
            ),
        )
    message = exc.detail if status != 404 else "Unknown request URL. Please check the URL and method."
    param = None
    problems = [p for p in exc.extra if isinstance(p, dict) and p.get("key")] if isinstance(exc.extra, list) else []
    if problems:
        param = str(problems[0]["key"])
        message = " ".join(
            f"Invalid '{p['key']}' in the {getattr(p.get('source'), 'value', 'request')}: {p.get('message')}."
            for p in problems
        )
    headers = None
    if status == 405 and exc.headers and "allow" in exc.headers:
        headers = {"allow": with_head(exc.headers["allow"])}
        message = f"{request.method} is not allowed on {request.url.path}: it takes {headers['allow']}."
    kind = NotFound if status == 404 else InvalidRequest if status < 500 else GatewayError
    return _gateway_error(request, kind(message, param=param, status=status, headers=headers))


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    log.error("unhandled error", exc_info=exc)
    return _gateway_error(request, GatewayError("The gateway hit an internal error."))


def _version() -> str:
    try:
        return metadata.version("tollgate")
    except metadata.PackageNotFoundError:
        return "0.0.0"


#: Most specific first: the fast path (app/http/hot_paths.py) takes the first that matches.
_EXCEPTION_HANDLERS: list[tuple[type[Exception], Any]] = [
    (GatewayError, _gateway_error),
    (HTTPException, _http_exception),
    (Exception, _unexpected),
]


#: OpenAI's audio endpoints (``app/http/routes/audio.py``).
AUDIO_ROUTES = [create_transcription, create_translation, create_speech]


def create_asgi_app(runtime: Runtime) -> Observed:
    """What uvicorn serves: every request observed (its id, log line and metrics) and held to its
    deadlines (``app/http/request_guard.py``), the generation endpoints straight to their handlers, the
    rest through Litestar."""
    hot = HotPaths(
        create_app(runtime),
        [chat_completions, create_response, create_message, create_embeddings, *AUDIO_ROUTES],
        dict(_EXCEPTION_HANDLERS),
        by_path=(lambda path: gemini_target(path) is not None, gemini_models_post),
    )
    keep = runtime.records.keep if runtime.records is not None else None
    return Observed(RequestGuard(hot, float(runtime.settings.body_timeout)), keep)


def create_app(runtime: Runtime) -> Litestar:
    async def close_runtime() -> None:
        await runtime.aclose()

    operations = [live, ready] + ([metrics] if runtime.settings.metrics_port is None else [])
    app = Litestar(
        route_handlers=[
            list_models,
            read_model,
            read_credits,
            create_checkout,
            *team_recharge_handlers,
            *log_handlers,
            stripe_webhook,
            read_key,
            read_request,
            chat_completions,
            create_embeddings,
            *AUDIO_ROUTES,
            create_response,
            create_message,
            count_tokens,
            gemini_models_post,
            gemini_list_models,
            gemini_read_model,
            upload_file,
            list_files,
            retrieve_file,
            delete_file,
            file_content,
            create_batch,
            retrieve_batch,
            list_batches,
            cancel_batch,
            create_message_batch,
            retrieve_message_batch,
            list_message_batches,
            cancel_message_batch,
            message_batch_results,
            create_image,
            edit_image,
            admin_router,
            *operations,
            dashboard_router,
        ],
        exception_handlers=dict(_EXCEPTION_HANDLERS),
        on_startup=[warm_up, runtime.start, settle_interpreter],
        on_shutdown=[close_runtime],
        openapi_config=openapi_config(_version()),
        request_max_body_size=runtime.settings.max_request_bytes,
        logging_config=None,  # the process's logging is app/observability/logs.py's
        debug=False,
    )
    app.state.runtime = runtime
    app.state.model_list = ModelListCache(runtime.settings, runtime.prices, int(time.time()))
    return app
