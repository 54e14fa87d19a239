"""The numbers and times the admin and dashboard APIs take in a query string, checked once.

Each becomes part of a database query (an OFFSET, a LIMIT, a comparison of times), so each is
bounded here with a 400 that names it, before a value the database cannot hold reaches it.
"""

from __future__ import annotations

from datetime import datetime

from app.errors import InvalidRequest

#: The last page a history may be asked for: past any real history (a thousand million entries at
#: the largest page size), and small enough that its offset fits the database's 64-bit integers.
MAX_PAGE = 1_000_000


def check_page(page: int, per_page: int, max_per_page: int) -> None:
    if not 1 <= page <= MAX_PAGE:
        raise InvalidRequest(f"Invalid 'page': expected a whole number from 1 to {MAX_PAGE}, got {page}.", param="page")
    if not 1 <= per_page <= max_per_page:
        raise InvalidRequest(f"Invalid 'per_page': expected a whole number from 1 to {max_per_page}, got {per_page}.",
                             param="per_page")


def check_limit(limit: int, largest: int) -> None:
    if not 1 <= limit <= largest:
        raise InvalidRequest(f"Invalid 'limit': expected a whole number from 1 to {largest}, got {limit}.",
                             param="limit")


def check_since(since: str | None) -> None:
    """``since`` is an ISO 8601 time (``2026-01-31`` or ``2026-01-31T12:00:00+00:00``), compared with
    the entries' times: anything else would silently match nothing, or everything."""
    if since is None:
        return
    try:
        datetime.fromisoformat(since)
    except ValueError:
        raise InvalidRequest(f"Invalid 'since': expected an ISO 8601 date or time, got {since!r}.",
                             param="since") from None
