"""The model list and a model, in Anthropic's shape, for a client of Anthropic's API.

Anthropic's SDK (``client.models.list()``, ``client.models.retrieve(id)``) sends ``anthropic-version``
to the same paths as OpenAI's, ``GET /v1/models`` and ``GET /v1/models/{id}``, and reads another
shape: a model is ``{"type": "model", "id", "display_name", "created_at"}`` (an RFC 3339 time), with
its limits as ``max_input_tokens`` and ``max_tokens``, and the list is a page of them
(``data``, ``has_more``, ``first_id``, ``last_id``) that the SDK walks with ``after_id`` or
``before_id``, ``limit`` at a time (1 to 1,000; 20 unless asked).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from app.errors import InvalidRequest
from domain.settings import Model

#: Anthropic's page size, unless the request asks another, and the largest it takes.
DEFAULT_LIMIT = 20
MAX_LIMIT = 1000


def anthropic_card(model: Model, default_created: int) -> dict[str, Any]:
    created = datetime.fromtimestamp(model.created or default_created, UTC)
    return {
        "type": "model",
        "id": model.id,
        "display_name": model.display_name,
        "created_at": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "lifecycle": "active",
        "max_input_tokens": model.context_window,
        "max_tokens": model.max_output_tokens,
    }


def anthropic_page(
    models: Sequence[Model], default_created: int, *, limit: int | None, after_id: str | None, before_id: str | None
) -> dict[str, Any]:
    """The page of ``models`` (in the configuration's order) the request asks for: ``limit`` of them
    after ``after_id``, or just before ``before_id``, or from the first."""
    size = DEFAULT_LIMIT if limit is None else limit
    if not 1 <= size <= MAX_LIMIT:
        raise InvalidRequest(f"limit: must be between 1 and {MAX_LIMIT}, got {size}.", param="limit")
    ids = [m.id for m in models]
    if after_id is not None and before_id is not None:
        raise InvalidRequest("Give after_id or before_id, not both.", param="after_id")
    if before_id is not None:
        end = _position(ids, before_id, "before_id")
        start = max(0, end - size)
        has_more = start > 0
    else:
        start = 0 if after_id is None else _position(ids, after_id, "after_id") + 1
        end = min(len(ids), start + size)
        has_more = end < len(ids)
    page = [anthropic_card(m, default_created) for m in models[start:end]]
    return {
        "data": page,
        "has_more": has_more,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
    }


def _position(ids: list[str], model_id: str, param: str) -> int:
    try:
        return ids.index(model_id)
    except ValueError:
        raise InvalidRequest(f"{param}: there is no model `{model_id}`.", param=param) from None
