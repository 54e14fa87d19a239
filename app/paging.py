"""The numbers and times a query takes (a page, a page size, a limit, a time), bounded once, for the
admin and dashboard APIs and the CLI alike.

Each becomes part of a database query (an OFFSET, a LIMIT, a comparison of times), so each is
bounded here, before a value the database cannot hold reaches it. A value out of bounds is an
:class:`OutOfBounds`: an ``InvalidRequest``, which the APIs answer as a 400 naming the query parameter
(``Invalid 'per_page': …``), and whose words the CLI says with its option's name instead
(``Invalid --per-page: …``, ``app/cli/support.py``). The words are written here, once.
"""

from __future__ import annotations

from datetime import datetime

from app.errors import InvalidRequest

#: The last page a history may be asked for: past any real history (a thousand million entries at
#: the largest page size), and small enough that its offset fits the database's 64-bit integers.
MAX_PAGE = 1_000_000
#: The most entries of a team's history in one page, in the admin API and ``tollgate ledger history``.
MAX_HISTORY_PER_PAGE = 1000


class OutOfBounds(InvalidRequest):
    """A query's value the database cannot take, or would silently misread; said by its parameter's
    name in the APIs' answers (``message``), by any other name with :meth:`said`."""

    def __init__(self, parameter: str, expected: str, got: str) -> None:
        self.parameter = parameter
        self.expected = expected
        self.got = got
        super().__init__(self.said(f"'{parameter}'"), param=parameter)

    def said(self, name: str) -> str:
        return f"Invalid {name}: expected {self.expected}, got {self.got}."


def check_page(page: int, per_page: int, max_per_page: int) -> None:
    if not 1 <= page <= MAX_PAGE:
        raise OutOfBounds("page", f"a whole number from 1 to {MAX_PAGE}", str(page))
    if not 1 <= per_page <= max_per_page:
        raise OutOfBounds("per_page", f"a whole number from 1 to {max_per_page}", str(per_page))


def check_limit(limit: int, largest: int) -> None:
    if not 1 <= limit <= largest:
        raise OutOfBounds("limit", f"a whole number from 1 to {largest}", str(limit))


def check_since(since: str | None) -> None:
    """``since`` is an ISO 8601 time (``2026-01-31`` or ``2026-01-31T12:00:00+00:00``), compared with
    the entries' times: anything else would silently match nothing, or everything."""
    if since is None:
        return
    try:
        datetime.fromisoformat(since)
    except ValueError:
        raise OutOfBounds("since", "an ISO 8601 date or time", repr(since)) from None
