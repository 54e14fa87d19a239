"""``GET /admin/teams/{name}/statements/{month}``: a team's monthly statement, as JSON or CSV.

The same statement as ``tollgate ledger statement --team NAME --month MONTH`` (``app/ledger/statements.py``
writes both), streamed a chunk of rows at a time as the team's events are read: ``format=json|csv``,
``chained=true`` for the tamper-evident form. It states whether it reconciles, in its body. The
dashboard's download (``app/http/dashboard/api.py``) answers with the same :func:`statement_stream`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

from litestar import Request, get
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, PathParameter, QueryParameter
from litestar.response import Stream

from app.errors import InvalidRequest
from app.http.routes.admin_common import ledger_call
from app.ledger.statements import FORMATS, MEDIA_TYPES, file_name, statement_chunks
from app.runtime import Runtime
from projections.statements import Month, Statement

#: Documented at /schema: JSON (format=json, the default) or CSV (``app/http/openapi.py`` lists both).
STATEMENT_ANSWER = ResponseSpec(
    data_container=str,
    media_type="application/json",
    generate_examples=False,
    description="the statement: JSON (format=json) or CSV (format=csv, text/csv)",
)
MONTH_PARAMETER = PathParameter(description="the UTC calendar month, YYYY-MM (e.g. 2026-11)")
FORMAT_PARAMETER = QueryParameter(name="format", description="json (the default) or csv")
CHAINED_PARAMETER = QueryParameter(
    description="true: every row carries the hash of the row before it, and the statement ends with the final hash"
)


async def statement_stream(runtime: Runtime, name: str, month: str, fmt: str, chained: bool) -> Stream:
    """The team's statement of ``month`` as a streamed attachment: 400 for a month or format that is
    not one, 404 for a team that does not exist (both before anything is sent)."""
    if fmt not in FORMATS:
        raise InvalidRequest("'format' must be 'json' or 'csv'.", param="format")
    try:
        parsed = Month.parse(month)
    except ValueError as exc:
        raise InvalidRequest(f"Invalid month: {exc}.", param="month") from None
    statement = await ledger_call(Statement, runtime.store, name, parsed)
    chunks = statement_chunks(statement, fmt, chained)
    return Stream(
        _streamed(chunks),
        media_type=MEDIA_TYPES[fmt],
        headers={"Content-Disposition": f'attachment; filename="{file_name(name, parsed.text, fmt, chained)}"'},
    )


async def _streamed(chunks: Iterator[str]) -> AsyncIterator[bytes]:
    """Each chunk read (the ledger's events, which block) in a worker thread, off the event loop."""
    while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
        yield chunk.encode()


@get("/teams/{name:str}/statements/{month:str}", responses={200: STATEMENT_ANSWER})
async def team_statement(
    request: Request[Any, Any, Any],
    name: FromPath[str],
    month: Annotated[str, MONTH_PARAMETER],
    fmt: Annotated[str, FORMAT_PARAMETER] = "json",
    chained: Annotated[bool, CHAINED_PARAMETER] = False,
) -> Stream:
    """The team's statement for a UTC calendar month, built from its events: opening balance, each
    top-up, charge and adjustment, charges by model and by key, adjustments, closing balance, and
    whether it reconciles with the replayed ledger and the audit history."""
    return await statement_stream(request.app.state.runtime, name, month, fmt, chained)


statement_handlers = [team_statement]
