"""The billed endpoints, by the names the ledger records and key restrictions use."""

from __future__ import annotations

CHAT = "chat.completions"
RESPONSES = "responses"
MESSAGES = "messages"
IMAGES_GENERATIONS = "images.generations"
IMAGES_EDITS = "images.edits"

#: Name → the path a client calls (``/v1/messages/count_tokens`` belongs to ``messages``).
ENDPOINT_PATHS = {
    CHAT: "/v1/chat/completions",
    RESPONSES: "/v1/responses",
    MESSAGES: "/v1/messages",
    IMAGES_GENERATIONS: "/v1/images/generations",
    IMAGES_EDITS: "/v1/images/edits",
}


def parse_endpoints(text: str) -> list[str]:
    """A comma-separated list of endpoint names ('' for any); paths are accepted too."""
    by_path = {path: name for name, path in ENDPOINT_PATHS.items()}
    names = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name = by_path.get(item, item)
        if name not in ENDPOINT_PATHS:
            raise ValueError(f"unknown endpoint {item!r}; expected one of {', '.join(ENDPOINT_PATHS)}")
        names.append(name)
    return names
