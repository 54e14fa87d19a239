"""Reading a request's attribution (``domain/attribution.py``) before anything is held.

The tags header is Tollgate's own: it is read here and never forwarded (only each protocol's version
headers go upstream, ``app/http/exchange.py``). The end user is a field of the body, which goes
upstream unchanged whatever it holds: a value the provider would refuse is the provider's to
refuse; a string is recorded (its first 256 characters), anything else is not.
"""

from __future__ import annotations

from typing import Any

from litestar import Request

from app.errors import InvalidRequest
from app.tokens import Protocol as Wire
from domain.attribution import AttributionError, end_user_of, parse_tags

TAGS_HEADER = "x-tollgate-tags"


def attribution_of(request: Request[Any, Any, Any], protocol: Wire, body: dict[str, Any]) -> tuple[dict[str, str], str]:
    """The request's tags and end user; a tags header that cannot be read is refused (400, in the
    endpoint's own error shape), before any hold."""
    headers = request.headers.getall(TAGS_HEADER, [])
    try:
        tags = parse_tags(",".join(headers)) if headers else {}
    except AttributionError as exc:
        raise InvalidRequest(f"Invalid '{TAGS_HEADER}' header: {exc}. Expected name=value pairs separated by "
                             "commas, e.g. 'project=alpha,env=ci'.", code="invalid_tags") from None
    if protocol == "messages":
        metadata = body.get("metadata")
        end_user = end_user_of(metadata.get("user_id")) if isinstance(metadata, dict) else ""
    else:
        end_user = end_user_of(body.get("user"))
    return tags, end_user
