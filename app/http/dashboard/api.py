"""The JSON API under /dashboard/api that the dashboard page reads.

Every route needs a key (``access.identify``): a team key reads its own team, the admin key any
team. The readings are the admin API's (``app.ledger.queries``, ``app.ledger.service``), shaped for people
(credits, newest first) rather than copied. Errors are the gateway's own classes, rendered in
OpenAI's error shape by the app's exception handlers. Database reads block, so they run in a
worker thread, off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

from litestar import Request, Response, Router, get, post
from litestar.datastructures import CacheControlHeader
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, FromQuery, QueryParameter
from litestar.response import Stream

from app.errors import InvalidRequest
from app.http.dashboard.access import changeable_team, identify, readable_team, viewer_of
from app.http.dashboard.views import (
    AlertsView,
    AttributionView,
    BuyView,
    CheckoutView,
    HistoryView,
    RequestsView,
    SessionView,
    TeamView,
    UsageView,
    alert_view,
    attribution_view,
    entry_view,
    team_view,
    usage_view,
)
from app.http.routes.admin_common import json_response, ledger_call
from app.http.routes.admin_statements import (
    CHAINED_PARAMETER,
    FORMAT_PARAMETER,
    MONTH_PARAMETER,
    STATEMENT_ANSWER,
    statement_stream,
)
from app.http.routes.payments import checkout_for
from app.http.routes.request_body import read_json_object
from app.ledger import queries
from app.paging import check_limit, check_page
from app.runtime import Runtime
from domain.attribution import AttributionError, dimension_of

_EXPORT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson; charset=utf-8"}


def _answers(view: type, description: str) -> dict[int, ResponseSpec]:
    return {200: ResponseSpec(data_container=view, description=description, generate_examples=False)}


@get("/session", responses=_answers(SessionView, "who signed in"))
async def read_session(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Who the presented key signs in as: a team (its own team only) or the admin (every team)."""
    viewer = viewer_of(request)
    if viewer.role == "team":
        return json_response(SessionView("team", viewer.team, viewer.key_id, [viewer.team or ""]))
    runtime: Runtime = request.app.state.runtime
    rows = await asyncio.to_thread(runtime.store.balances)
    return json_response(SessionView("admin", None, None, sorted(r.team_name for r in rows)))


@get("/teams/{name:str}", responses=_answers(TeamView, "the team's balance, held and available credits, and keys"))
async def read_team(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    """The team's balance, credits held by requests in flight, what is available, and its keys."""
    summary = await readable_team(request, name)
    runtime: Runtime = request.app.state.runtime
    keys = await ledger_call(runtime.ledger.list_keys, name)
    funds = await ledger_call(runtime.ledger.funds, name)
    payments = runtime.settings.payments
    buy = BuyView(payments.currency, str(payments.min_amount), str(payments.max_amount)) if payments else None
    return json_response(team_view(summary, keys, funds, buy))


@post("/teams/{name:str}/checkout", status_code=200, responses=_answers(CheckoutView, "where to pay for the top-up"))
async def start_checkout(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    """A Stripe Checkout Session for the team's top-up ("Buy credits"), for its own key or an operator."""
    await changeable_team(request, name)
    runtime: Runtime = request.app.state.runtime
    body = read_json_object(await request.body(), runtime.settings.max_json_depth)
    checkout = await checkout_for(runtime, name, body.get("amount"))
    return json_response(CheckoutView(checkout.session_id, checkout.url))


@get("/teams/{name:str}/history", responses=_answers(HistoryView, "one page of ledger entries, newest first"))
async def read_history(
    request: Request[Any, Any, Any], name: FromPath[str], page: FromQuery[int] = 1, per_page: FromQuery[int] = 20
) -> Response[bytes]:
    """Every ledger entry of the team (top-ups and charges, each with the balance after), newest first."""
    check_page(page, per_page, 500)
    await readable_team(request, name)
    runtime: Runtime = request.app.state.runtime
    answer = await asyncio.to_thread(queries.history_page, runtime.store, name, page, per_page, None, True)
    return json_response(
        HistoryView(name, [entry_view(r) for r in answer["data"]], page, per_page, answer["total"], answer["has_more"])
    )


@get("/teams/{name:str}/usage", responses=_answers(UsageView, "usage by model, by endpoint, and by key × model × day"))
async def read_usage(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    """Requests, tokens and credits spent, by model and by day (UTC)."""
    await readable_team(request, name)
    runtime: Runtime = request.app.state.runtime
    return json_response(usage_view(await asyncio.to_thread(queries.usage, runtime.store, name)))


@get("/teams/{name:str}/attribution", responses=_answers(AttributionView, "usage by a tag's values, or by end user"))
async def read_attribution(
    request: Request[Any, Any, Any],
    name: FromPath[str],
    by: FromQuery[str] = "user",
    page: FromQuery[int] = 1,
    per_page: FromQuery[int] = queries.USAGE_PER_PAGE,
) -> Response[bytes]:
    """Requests, tokens and credits by the values of ``by`` (``user`` or ``tag:<name>``), charges
    without it under ``""``, a page of values at a time; and the dimensions the team's usage can be
    reported by."""
    try:
        dimension = dimension_of(by)
    except AttributionError as exc:
        raise InvalidRequest(f"Invalid 'by': {exc}.", param="by") from None
    check_page(page, per_page, queries.MAX_USAGE_PER_PAGE)
    await readable_team(request, name)
    runtime: Runtime = request.app.state.runtime
    return json_response(
        attribution_view(
            await asyncio.to_thread(queries.usage_by, runtime.store, name, dimension, None, page, per_page)
        )
    )


@get("/teams/{name:str}/requests", responses=_answers(RequestsView, "the latest charges, newest first"))
async def read_requests(
    request: Request[Any, Any, Any], name: FromPath[str], limit: FromQuery[int] = 20
) -> Response[bytes]:
    """The team's latest charged requests, newest first."""
    check_limit(limit, 500)
    await readable_team(request, name)
    runtime: Runtime = request.app.state.runtime
    rows = await asyncio.to_thread(queries.latest_charges, runtime.store, name, limit)
    return json_response(RequestsView(name, [entry_view(r) for r in rows]))


@get("/teams/{name:str}/alerts", responses=_answers(AlertsView, "the latest alerts, newest first"))
async def read_alerts(
    request: Request[Any, Any, Any], name: FromPath[str], limit: FromQuery[int] = 20
) -> Response[bytes]:
    """The team's latest alerts (budget thresholds reached, the balance under a line), newest first."""
    check_limit(limit, 500)
    await readable_team(request, name)
    runtime: Runtime = request.app.state.runtime
    rows = await asyncio.to_thread(queries.recent_alerts, runtime.store, name, limit)
    return json_response(AlertsView(name, [alert_view(r) for r in rows]))


_EXPORT_ANSWER = ResponseSpec(
    data_container=str,
    media_type="text/csv",
    generate_examples=False,
    description=("an attachment: CSV (format=csv) or JSON Lines (format=jsonl, application/x-ndjson)"),
)


@get("/teams/{name:str}/export", responses={200: _EXPORT_ANSWER})
async def export_history(
    request: Request[Any, Any, Any],
    name: FromPath[str],
    fmt: Annotated[str, QueryParameter(name="format", description="csv or jsonl")] = "csv",
) -> Stream:
    """The team's whole audit history as a download, the same lines as ``tollgate ledger export --team NAME``
    (every column of the ledger's rows, amounts in micro-credits), streamed a page at a time."""
    if fmt not in queries.EXPORT_FORMATS:
        raise InvalidRequest("'format' must be 'csv' or 'jsonl'.", param="format")
    await readable_team(request, name)
    runtime: Runtime = request.app.state.runtime
    upto = await asyncio.to_thread(queries.export_upto, runtime.store)
    return Stream(
        _streamed(queries.export_chunks(runtime.store, name, fmt, upto)),
        media_type=_EXPORT_TYPES[fmt],
        headers={"Content-Disposition": f'attachment; filename="tollgate-{name}-ledger.{fmt}"'},
    )


@get("/teams/{name:str}/statements/{month:str}", responses={200: STATEMENT_ANSWER})
async def download_statement(
    request: Request[Any, Any, Any],
    name: FromPath[str],
    month: Annotated[str, MONTH_PARAMETER],
    fmt: Annotated[str, FORMAT_PARAMETER] = "json",
    chained: Annotated[bool, CHAINED_PARAMETER] = False,
) -> Stream:
    """The team's statement for a UTC calendar month, as ``tollgate ledger statement`` writes it and
    ``GET /admin/teams/{name}/statements/{month}`` answers it."""
    await readable_team(request, name)
    return await statement_stream(request.app.state.runtime, name, month, fmt, chained)


async def _streamed(chunks: Iterator[str]) -> AsyncIterator[bytes]:
    """Each chunk read (a page of the database, which blocks) in a worker thread, off the event loop."""
    while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
        yield chunk.encode()


dashboard_api = Router(
    path="/dashboard/api",
    route_handlers=[
        read_session,
        read_team,
        start_checkout,
        read_history,
        read_usage,
        read_attribution,
        read_requests,
        read_alerts,
        export_history,
        download_statement,
    ],
    before_request=identify,
    cache_control=CacheControlHeader(no_store=True),  # balances and keys ids: never kept by a cache
    tags=["dashboard"],
)
