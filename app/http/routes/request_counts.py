"""How many messages, tools and content parts one request may carry.

Every element of a request costs the gateway work before the upstream sees it — its validation,
its token count, its translation — so a body of a million one-character messages would cost far
more than its size suggests. The limits (``max_messages``, ``max_tools``, ``max_content_parts``)
sit well above what real clients send (a long coding-agent session: a few thousand messages, a few
dozen tools) and are checked on the parsed body, before anything else looks at it: over one, 400
naming the field, and nothing is held.
"""

from __future__ import annotations

from typing import Any

from app.errors import InvalidRequest
from app.tokens import Protocol
from domain.settings import Settings

#: Where each protocol keeps its conversation.
_ITEMS: dict[Protocol, str] = {"chat": "messages", "responses": "input", "messages": "messages", "gemini": "contents"}
#: Where an item keeps its parts (Gemini's contents: ``parts``).
_PARTS: dict[str, str] = {"contents": "parts"}


def check_counts(body: dict[str, Any], protocol: Protocol, settings: Settings) -> None:
    """400 if the request carries more messages (or input items), tools or content parts than allowed."""
    field = _ITEMS[protocol]
    items = body.get(field)
    if isinstance(items, list) and len(items) > settings.max_messages:
        what = "input items" if field == "input" else "messages"
        raise InvalidRequest(
            f"'{field}' has {len(items)} {what}; this gateway takes at most {settings.max_messages} in one request.",
            param=field,
        )
    tools = body.get("tools")
    if isinstance(tools, list) and len(tools) > settings.max_tools:
        raise InvalidRequest(
            f"'tools' has {len(tools)} tools; this gateway takes at most {settings.max_tools} in one request.",
            param="tools",
        )
    _check_parts(body, field, items, settings.max_content_parts)


def _check_parts(body: dict[str, Any], field: str, items: Any, limit: int) -> None:
    system = body.get("system")
    parts = len(system) if isinstance(system, list) else 0
    if parts > limit:
        _too_many_parts(limit, "system")
    if not isinstance(items, list):
        return
    for i, item in enumerate(items):
        content = item.get(_PARTS.get(field, "content")) if isinstance(item, dict) else None
        if isinstance(content, list):
            parts += len(content)
            if parts > limit:
                _too_many_parts(limit, f"{field}[{i}].{_PARTS.get(field, 'content')}")


def _too_many_parts(limit: int, where: str) -> None:
    raise InvalidRequest(
        f"The request has more than {limit} content parts (counted up to '{where}'); this "
        "gateway takes at most that many in one request.",
        param=where,
    )
