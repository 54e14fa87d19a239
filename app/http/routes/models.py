"""GET /v1/models: the models this gateway offers, with their limits and prices (no auth)."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get

from app.http.routes.answers import ModelList, answers
from app.json import encode
from domain.settings import Model, Settings


def model_card(model: Model, default_created: int) -> dict[str, Any]:
    return {
        "id": model.id,
        "object": "model",
        "created": model.created or default_created,
        "owned_by": model.owned_by,
        "display_name": model.display_name,
        "context_window": model.context_window,
        "max_output_tokens": model.max_output_tokens,
        "capabilities": {"vision": model.vision},
        "reasoning": {
            "effort_levels": [{"value": e.value, "display": e.display} for e in model.effort_levels],
            "default_effort_level": model.default_effort_level,
        },
        "pricing": {
            "input": model.pricing.input,
            "output": model.pricing.output,
            "cache_create": model.pricing.cache_create,
            "cache_hit": model.pricing.cache_hit,
        },
    }


def model_list_body(settings: Settings, default_created: int) -> bytes:
    """The whole response, encoded once: the model list only changes with the configuration."""
    return encode({"object": "list", "data": [model_card(m, default_created) for m in settings.models]})


@get("/v1/models", sync_to_thread=False,
     responses=answers(ModelList, "every model, with its limits, effort levels and prices"))
def list_models(request: Request[Any, Any, Any]) -> Response[bytes]:
    return Response(request.app.state.model_list_body, media_type="application/json")
