"""GET /v1beta/models and GET /v1beta/models/{model}: the models that serve the Gemini API, in
Google's ``Model`` shape (no auth, as ``GET /v1/models``). Google's SDK asks ``/v1/models`` by default,
OpenAI's path: a request that carries Google's headers (``x-goog-api-key``, ``x-goog-api-client``) is
answered there in Google's shape too (``app/http/routes/models.py``), its errors as well.

A model is ``{"name": "models/ID", "displayName", "inputTokenLimit", "outputTokenLimit",
"supportedGenerationMethods"}``; the list is a page of them (``models``, and ``nextPageToken`` when
more follow) that Google's SDKs walk with ``pageToken``, ``pageSize`` at a time (1 to 1,000; 50
unless asked). Only the models that serve ``generate_content`` are listed or found.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get
from litestar.params import FromPath

from app.errors import InvalidRequest, ModelNotFound
from app.json import encode
from app.runtime import Runtime
from domain import endpoints
from domain.settings import Model

DEFAULT_PAGE = 50
MAX_PAGE = 1000
METHODS = ["generateContent", "streamGenerateContent", "countTokens"]


def gemini_card(model: Model) -> dict[str, Any]:
    return {
        "name": f"models/{model.id}",
        "baseModelId": model.id,
        "version": "001",
        "displayName": model.display_name,
        "description": model.display_name,
        "inputTokenLimit": model.context_window,
        "outputTokenLimit": model.max_output_tokens,
        "supportedGenerationMethods": METHODS,
    }


def _number(text: str | None, name: str, default: int) -> int:
    if text is None or text == "":
        return default
    if not text.isdigit():
        raise InvalidRequest(f"{name}: expected a whole number, got {text!r}.", param=name)
    return int(text)


def speaks_google(request: Request[Any, Any, Any]) -> bool:
    """Whether the client is one of Google's SDKs (or sends its key as they do)."""
    return "x-goog-api-key" in request.headers or "x-goog-api-client" in request.headers


@get("/v1beta/models", sync_to_thread=False)
def gemini_list_models(request: Request[Any, Any, Any]) -> Response[bytes]:
    return gemini_page(request)


@get("/v1beta/models/{name:path}", sync_to_thread=False)
def gemini_read_model(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    return gemini_model(request, name)


def gemini_page(request: Request[Any, Any, Any]) -> Response[bytes]:
    """A page of the models; ``pageToken`` is where the last page stopped (its ``nextPageToken``)."""
    runtime: Runtime = request.app.state.runtime
    size = _number(request.query_params.get("pageSize"), "pageSize", DEFAULT_PAGE)
    if not 1 <= size <= MAX_PAGE:
        raise InvalidRequest(f"pageSize: must be between 1 and {MAX_PAGE}, got {size}.", param="pageSize")
    start = _number(request.query_params.get("pageToken"), "pageToken", 0)
    served = [m for m in runtime.settings.models if m.serves(endpoints.GENERATE_CONTENT)]
    page: dict[str, Any] = {"models": [gemini_card(m) for m in served[start : start + size]]}
    if start + size < len(served):
        page["nextPageToken"] = str(start + size)
    return Response(encode(page), media_type="application/json")


def gemini_model(request: Request[Any, Any, Any], name: str) -> Response[bytes]:
    """A model by its name (``models/ID``, or its id alone)."""
    runtime: Runtime = request.app.state.runtime
    model_id = name.removeprefix("/").removeprefix("models/")
    model = runtime.settings.model(model_id)
    if model is None or not model.serves(endpoints.GENERATE_CONTENT):
        raise ModelNotFound(model_id)
    return Response(encode(gemini_card(model)), media_type="application/json")
