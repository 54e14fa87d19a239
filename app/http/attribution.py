"""Reading a request's attribution (``domain/attribution.py``) before anything is held.

The tags header is Tollgate's own: it is read here and never forwarded (only each protocol's version
headers go upstream, ``app/translate/exchange.py``); its bytes are UTF-8. The end user is a field of the
body, which goes upstream unchanged whatever it holds: a string is recorded (its first 256
characters), anything else is not — but a string holding what no recorded text may hold (NUL, a
control or bidirectional control character: ``domain/client_text.py``) is refused, naming the
field, before any hold, since the charge would record it.
"""

from __future__ import annotations

from typing import Any

from litestar import Request

from app.errors import InvalidRequest
from app.tokens import Protocol as Wire
from domain.attribution import Attribution, AttributionError, end_user_of, parse_tags
from domain.client_text import ClientTextError, header_text

TAGS_HEADER = "x-tollgate-tags"


def attribution_of(request: Request[Any, Any, Any], protocol: Wire, body: dict[str, Any]) -> Attribution:
    """The request's tags and end user; a tags header that cannot be read, or an end user that
    cannot be recorded, is refused (400, in the endpoint's own error shape), before any hold."""
    headers = request.headers.getall(TAGS_HEADER, [])
    try:
        tags = parse_tags(",".join(header_text(h, TAGS_HEADER) for h in headers)) if headers else {}
    except (AttributionError, ClientTextError) as exc:
        problem = exc.problem if isinstance(exc, ClientTextError) else str(exc)
        raise InvalidRequest(
            f"Invalid '{TAGS_HEADER}' header: {problem}. Expected name=value pairs separated by "
            "commas, e.g. 'project=alpha,env=ci'.",
            code="invalid_tags",
        ) from None
    try:
        if protocol == "messages":
            metadata = body.get("metadata")
            end_user = end_user_of(metadata.get("user_id"), "metadata.user_id") if isinstance(metadata, dict) else ""
        else:
            end_user = end_user_of(body.get("user"), "user")
    except ClientTextError as exc:
        raise InvalidRequest(
            f"Invalid '{exc.field}': {exc.problem}.", param=exc.field, code="invalid_end_user"
        ) from None
    return Attribution(tags, end_user)
