"""The OpenAPI document at ``/schema`` (``/schema/openapi.json``): Litestar's, completed for the
generation endpoints.

Litestar documents the admin API from its typed handlers. The generation endpoints read their body
themselves (they must answer bad JSON in their own protocol's error shape, and pass every field they
do not know through to the upstream untouched), so Litestar sees no body and no error shapes there.
The document is completed where it is rendered: each generation path gets its request body — the
msgspec schema of the fields the gateway itself validates, open to any other field — its success
answers (JSON, or server-sent events when ``stream`` is true) and its errors in its own protocol's
shape (OpenAI's ``{"error": {...}}``, Anthropic's ``{"type": "error", "error": {...}}``).
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec
from litestar import Request
from litestar.openapi.config import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin

from app.http.openapi_audio import document_audio
from app.http.routes.admin import KeyModels, NewCredits, NewKey, NewTeam
from app.http.routes.admin_policies import KeyEndpoints, NewLimits, Suspension
from app.http.routes.chat import ChatRequest
from app.http.routes.embeddings import EmbeddingsRequest
from app.http.routes.images import ImageGeneration
from app.http.routes.messages import MessagesRequest
from app.http.routes.responses import ResponsesRequest
from app.http.schema_page import RedocPage, schema_router

#: The two error bodies (``app/errors.py`` renders them), as components every error answer refers to.
_ERROR_SCHEMAS = {
    "OpenAIError": {
        "type": "object",
        "required": ["error"],
        "additionalProperties": False,
        "description": "An error, in OpenAI's shape: chat, responses, models (without anthropic-version), admin, "
        "dashboard, metrics.",
        "properties": {
            "error": {
                "type": "object",
                "required": ["message", "type", "param", "code"],
                "additionalProperties": False,
                "properties": {
                    "message": {"type": "string"},
                    "type": {"type": "string"},
                    "param": {"type": ["string", "null"]},
                    "code": {"type": ["string", "null"]},
                },
            }
        },
    },
    "AnthropicError": {
        "type": "object",
        "required": ["type", "error"],
        "description": "An error, in Anthropic's shape: /v1/messages, /v1/messages/count_tokens, and the model "
        "routes for a request that carries anthropic-version.",
        "properties": {
            "type": {"const": "error"},
            "error": {
                "type": "object",
                "required": ["type", "message"],
                "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
    "GoogleError": {
        "type": "object",
        "required": ["error"],
        "description": "An error, in Google's shape: the Gemini API (/v1beta/models, its generateContent, "
        "streamGenerateContent and countTokens also under /v1/models), and the model routes for a request that "
        "carries x-goog-api-key or x-goog-api-client.",
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "status"],
                "properties": {
                    "code": {"type": "integer"},
                    "message": {"type": "string"},
                    "status": {"type": "string"},
                },
            }
        },
    },
}
_OPENAI_ERROR = {"$ref": "#/components/schemas/OpenAIError"}
_GOOGLE_ERROR = {"$ref": "#/components/schemas/GoogleError"}
_ANTHROPIC_ERROR = {"$ref": "#/components/schemas/AnthropicError"}
_ERRORS = {
    "400": "invalid request",
    "401": "missing, invalid or revoked API key",
    "402": "the team's credits cannot cover the request's worst case",
    "403": "the key may not use this model or endpoint, or the team is suspended",
    "404": "unknown model, or one that does not serve the endpoint",
    "413": "request body too large",
    "429": "rate limited (see Retry-After)",
    "502": "the upstream failed",
    "503": "the upstream is overloaded, or the ledger cannot be written",
    "504": "the upstream timed out",
}
_DASHBOARD_ERRORS = {
    "400": "an invalid query parameter",
    "401": "missing, invalid or revoked key",
    "403": "a team key asking for another team",
    "404": "no such team (admin key)",
}
_ADMIN_ERRORS = {
    "400": "an invalid body, path or query parameter",
    "401": "not the admin key",
    "403": "a team key (the admin API takes the admin key only), or the admin API is off",
    "404": "no such team or key",
}
#: Errors any route may answer, in its own shape.
_ANY_ERROR = "any other error in the same shape: 405 (method), 500 (a fault of the gateway's), 503 (the ledger)"

#: path → (request struct, error shape, summary, answers with a stream when ``stream`` is true)
_GENERATION = {
    "/v1/chat/completions": (ChatRequest, "openai", "OpenAI Chat Completions, billed to the key's team", True),
    "/v1/responses": (ResponsesRequest, "openai", "OpenAI Responses, billed to the key's team", True),
    "/v1/messages": (MessagesRequest, "anthropic", "Anthropic Messages, billed to the key's team", True),
    "/v1/messages/count_tokens": (MessagesRequest, "anthropic", "Anthropic token count (free)", False),
    "/v1/images/generations": (
        ImageGeneration,
        "openai",
        "OpenAI image generation, billed per image (or per token) to the key's team",
        False,
    ),
    "/v1/embeddings": (
        EmbeddingsRequest,
        "openai",
        "OpenAI embeddings, billed per input token to the key's team (the vectors passed through untouched)",
        False,
    ),
}


_BINARY = {"type": "string", "format": "binary"}
#: path → (its multipart form's schema, summary): the endpoints that take uploads.
_UPLOADS: dict[str, tuple[dict[str, Any], str]] = {
    "/v1/images/edits": (
        {
            "type": "object",
            "required": ["model", "prompt"],
            "properties": {
                "model": {"type": "string"},
                "prompt": {"type": "string", "maxLength": 32000},
                "image": _BINARY,
                "image[]": {"type": "array", "items": _BINARY, "maxItems": 16},
                "mask": _BINARY,
                "n": {"type": "integer", "minimum": 1, "maximum": 10},
                "size": {"type": "string"},
                "quality": {"type": "string"},
                "response_format": {"type": "string", "enum": ["url", "b64_json"]},
            },
        },
        "OpenAI image edits (multipart), billed per image (or per token) to the key's team",
    ),
}


#: (path, method) → the admin request's body; admin handlers read and validate it themselves too.
_ADMIN_BODIES = {
    ("/admin/teams", "post"): NewTeam,
    ("/admin/teams/{name}/credits", "post"): NewCredits,
    ("/admin/teams/{name}/keys", "post"): NewKey,
    ("/admin/teams/{name}/keys/{key_id}/models", "put"): KeyModels,
    ("/admin/teams/{name}/keys/{key_id}/endpoints", "put"): KeyEndpoints,
    ("/admin/teams/{name}/keys/{key_id}/limits", "put"): NewLimits,
    ("/admin/teams/{name}/limits", "put"): NewLimits,
    ("/admin/teams/{name}/suspend", "post"): Suspension,
}


#: Routes answering a statement (``app/http/routes/admin_statements.py``): JSON or CSV, as ``format`` says.
_STATEMENT_PATHS = ("/admin/teams/{name}/statements/{month}", "/dashboard/api/teams/{name}/statements/{month}")
_STATEMENT_CONTENT = {
    "application/json": {"schema": {"type": "object", "description": "the statement (format=json)"}},
    "text/csv": {
        "schema": {"type": "string", "description": "the statement (format=csv): a header line, then a line per row"}
    },
}


def _body_schemas() -> tuple[dict[type, dict[str, Any]], dict[str, Any]]:
    """Each request struct's schema (by reference) and the component schemas they use."""
    structs = sorted(
        {entry[0] for entry in _GENERATION.values()} | set(_ADMIN_BODIES.values()), key=lambda s: s.__name__
    )
    refs, components = msgspec.json.schema_components(structs, ref_template="#/components/schemas/{name}")
    return dict(zip(structs, refs, strict=True)), components


def complete(document: dict[str, Any]) -> dict[str, Any]:
    """Litestar's document with the generation endpoints' bodies, answers and errors filled in."""
    document = copy.deepcopy(document)
    refs, components = _body_schemas()
    document.setdefault("components", {}).setdefault("schemas", {}).update({**components, **_ERROR_SCHEMAS})
    schemes = document["components"].setdefault("securitySchemes", {})
    schemes["bearer"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "A Tollgate team key (or the admin key on /admin and /dashboard/api)",
    }
    schemes["x-api-key"] = {"type": "apiKey", "in": "header", "name": "x-api-key", "description": "A Tollgate team key"}
    for path, (struct, shape, summary, streams) in _GENERATION.items():
        operation = document.setdefault("paths", {}).setdefault(path, {}).setdefault("post", {})
        error = _OPENAI_ERROR if shape == "openai" else _ANTHROPIC_ERROR
        content: dict[str, Any] = {"application/json": {"schema": {"type": "object", "additionalProperties": True}}}
        if streams:
            content["text/event-stream"] = {
                "schema": {"type": "string", "description": "server-sent events of the protocol"}
            }
        operation.update(
            {
                "summary": summary,
                "description": "Fields not listed are passed to the upstream untouched. Non-streaming answers carry "
                "`usage.cost` and `usage.remaining` (credits); so does a stream's final usage event.",
                "security": [{"bearer": []}, {"x-api-key": []}],
                "requestBody": {"required": True, "content": {"application/json": {"schema": refs[struct]}}},
                "responses": {
                    "200": {"description": "the answer", "content": content},
                    **{
                        code: {"description": why, "content": {"application/json": {"schema": error}}}
                        for code, why in _ERRORS.items()
                    },
                },
            }
        )
        operation.pop("parameters", None)  # Litestar's view of the handler's `request` argument
    for path, (form, summary) in _UPLOADS.items():
        operation = document.setdefault("paths", {}).setdefault(path, {}).setdefault("post", {})
        operation.update(
            {
                "summary": summary,
                "description": "A multipart/form-data body; fields not listed are passed to the upstream "
                "untouched. The answer's `usage` carries `cost` and `remaining` (credits).",
                "security": [{"bearer": []}, {"x-api-key": []}],
                "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": form}}},
                "responses": {
                    "200": {
                        "description": "the answer",
                        "content": {"application/json": {"schema": {"type": "object", "additionalProperties": True}}},
                    },
                    **{
                        code: {"description": why, "content": {"application/json": {"schema": _OPENAI_ERROR}}}
                        for code, why in _ERRORS.items()
                    },
                },
            }
        )
        operation.pop("parameters", None)
    for (path, method), struct in _ADMIN_BODIES.items():
        operation = document.get("paths", {}).get(path, {}).get(method)
        if operation is not None:
            operation["requestBody"] = {
                "required": method != "post" or struct is not NewKey,
                "content": {"application/json": {"schema": refs[struct]}},
            }
    for path in _STATEMENT_PATHS:
        answer = document.get("paths", {}).get(path, {}).get("get", {}).get("responses", {}).get("200")
        if answer is not None:
            answer["content"] = copy.deepcopy(_STATEMENT_CONTENT)
    document_audio(document, _OPENAI_ERROR)
    _document_json_answers(document)
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if isinstance(operation, dict):
                _document_errors(path, method, operation)
    return document


#: The routes whose answers are JSON objects of a provider's shape: the Files and Batch APIs (OpenAI's
#: and Anthropic's; but the two that stream a file as it is, JSON Lines) and the Gemini API's model list.
_JSON_OBJECT_PREFIXES = ("/v1/files", "/v1/batches", "/v1/messages/batches", "/v1beta/models")
_FILE_STREAMS = {
    "/v1/files/{file_id}/content": "application/octet-stream",
    "/v1/messages/batches/{batch_id}/results": "application/binary",  # what Anthropic's API and SDK say
}


def _document_json_answers(document: dict[str, Any]) -> None:
    """What Litestar says of a handler answering ``Response[bytes]`` (a string) replaced by what these
    routes send: a JSON object, or the file's lines."""
    for path, item in document.get("paths", {}).items():
        if not path.startswith(_JSON_OBJECT_PREFIXES):
            continue
        for operation in item.values():
            answer = operation.get("responses", {}).get("200") if isinstance(operation, dict) else None
            if answer is None:
                continue
            if path in _FILE_STREAMS:
                answer["content"] = {_FILE_STREAMS[path]: {"schema": copy.deepcopy(_BINARY)}}
            else:
                answer["content"] = {"application/json": {"schema": {"type": "object", "additionalProperties": True}}}


def _document_errors(path: str, method: str, operation: dict[str, Any]) -> None:
    """Every error answer of a route in the shape the gateway really sends (``app/http/server.py``
    renders Litestar's own refusals, such as a query parameter of the wrong type, in it too): the
    route's own errors, and a default for the rest. Litestar's ``{status_code, detail}`` is replaced."""
    if path.startswith("/health"):
        return  # readiness answers its own checks, as JSON of its own
    schema = _error_schema(path)
    responses = operation.setdefault("responses", {})
    for code, why in _route_errors(path, method, operation).items():
        responses.setdefault(code, {"description": why})
    responses.setdefault("default", {"description": _ANY_ERROR})
    for code, answer in responses.items():
        if code == "default" or code[0] in "45":
            answer["content"] = {"application/json": {"schema": schema}}


def _route_errors(path: str, method: str, operation: dict[str, Any]) -> dict[str, str]:
    """The errors a route answers itself (and the keys it takes, in ``operation``'s security)."""
    errors: dict[str, str] = {}
    if path.startswith("/admin"):
        operation["security"] = [{"bearer": []}]
        errors = dict(_ADMIN_ERRORS)
        if (path, method) == ("/admin/teams", "post"):
            errors["409"] = "a team of that name exists"
    elif path.startswith("/dashboard/api"):  # a team key (its own team) or the admin key (any team)
        operation["security"] = [{"bearer": []}]
        errors = dict(_DASHBOARD_ERRORS)
        if path == "/admin/requests/{request_id}":
            errors["404"] = "no request with that id"
    elif path == "/v1/requests/{request_id}":
        operation["security"] = [{"bearer": []}, {"x-api-key": []}]
        errors = {
            "401": "missing, invalid or revoked API key",
            "404": "no request with that id of the key's team (another team's looks the same)",
        }
    elif path == "/metrics":
        errors = {"401": "not the admin key"}
    elif path == "/v1/models/{model_id}":
        errors = {"404": "no model with that id"}
    return errors


def _error_schema(path: str) -> dict[str, Any]:
    """The error body of a route: Anthropic's on the Messages endpoints, Google's on the Gemini API's,
    any of the three on the model routes (by the client's headers), OpenAI's everywhere else."""
    if path.startswith("/v1/messages"):
        return _ANTHROPIC_ERROR
    if path.startswith("/v1beta/"):
        return _GOOGLE_ERROR
    if path.startswith("/v1/models"):
        return {"anyOf": [_OPENAI_ERROR, _ANTHROPIC_ERROR, _GOOGLE_ERROR]}
    return _OPENAI_ERROR


class _CompletedJson(JsonRenderPlugin):
    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return super().render(request, complete(openapi_schema))


def openapi_config(version: str) -> OpenAPIConfig:
    return OpenAPIConfig(
        title="Tollgate",
        version=version,
        path="/schema",
        description="An LLM gateway billing every request to a team's prepaid credits.",
        render_plugins=[_CompletedJson(), RedocPage()],
        openapi_router=schema_router(),
    )
