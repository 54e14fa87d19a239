"""The Litestar application: routes, and the one place errors become response bodies."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Litestar, Request, Response
from litestar.exceptions import HTTPException

from app.errors import GatewayError
from app.json import encode
from app.routes.chat import chat_completions
from app.routes.models import list_models
from app.runtime import Runtime

log = logging.getLogger("tollgate")


def _error_response(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response[bytes]:
    return Response(encode(body), status_code=status, media_type="application/json", headers=headers)


def _gateway_error(_: Request[Any, Any, Any], exc: GatewayError) -> Response[bytes]:
    return _error_response(exc.status, exc.openai_body(), exc.headers)


def _http_exception(_: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    status = exc.status_code
    kind = "invalid_request_error" if status < 500 else "server_error"
    message = exc.detail if status != 404 else "Unknown request URL. Please check the URL and method."
    return _error_response(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})


def _unexpected(_: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    log.exception("unhandled error", exc_info=exc)
    return _error_response(
        500, {"error": {"message": "The gateway hit an internal error.", "type": "server_error", "param": None, "code": None}}
    )


def create_app(runtime: Runtime) -> Litestar:
    async def close_runtime() -> None:
        await runtime.aclose()

    app = Litestar(
        route_handlers=[list_models, chat_completions],
        exception_handlers={GatewayError: _gateway_error, HTTPException: _http_exception, Exception: _unexpected},
        on_shutdown=[close_runtime],
        openapi_config=None,
        debug=False,
    )
    app.state.runtime = runtime
    return app
