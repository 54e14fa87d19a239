"""Anthropic's Message Batches: ``/v1/messages/batches`` create, retrieve, list, cancel and results, for
``anthropic`` upstreams, accounted as OpenAI's batches are (``app/http/routes/batches.py``).

Each request (``{"custom_id", "params"}``) is checked as the same ``POST /v1/messages`` sent alone
(``app/http/batch_lines.py``); the first bad one refuses the batch, naming it (``requests[2]``). One
hold for every request's worst case at the batch price; the pollers charge each succeeded result
from its own usage when the upstream says the batch ended, and release the rest. Until then the batch
shows ``in_progress``: a client that waits for ``ended`` finds every result charged. Errors are in
the Messages shape.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import replace
from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.params import FromPath
from litestar.response import Stream

from app.batches.deployments import ANTHROPIC_KINDS, anthropic_client, batch_deployment
from app.batches.settle import ANTHROPIC
from app.errors import GatewayError, InvalidRequest, NotFound
from app.http.attribution import attribution_of
from app.http.batch_lines import MessagesChecker
from app.http.routes.admin_common import json_response
from app.http.routes.auth import authenticate
from app.http.routes.batch_common import iso, keep, kept_before, key_of, open_batch, page, page_limit, relay
from app.http.routes.request_body import request_json
from app.runtime import Runtime
from app.store.batch_store import StoredBatch
from app.upstream.batch_errors import BatchUpstreamError

PATH = "/v1/messages/batches"


def _shown(request: Request[Any, Any, Any], batch: StoredBatch) -> dict[str, Any]:
    upstream: dict[str, Any] = msgspec.json.decode(batch.upstream or "{}")
    ended = bool(batch.settled)
    counts = upstream.get("request_counts") if ended else None
    root = str(request.base_url).rstrip("/")
    return {
        "id": batch.batch_id,
        "type": "message_batch",
        "processing_status": "ended" if ended else ("canceling" if batch.status == "canceling" else "in_progress"),
        "request_counts": counts
        or {"processing": batch.lines, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
        "ended_at": upstream.get("ended_at") if ended else None,
        "created_at": iso(batch.created_at),
        "expires_at": upstream.get("expires_at") or iso(batch.created_at + 86400),
        "archived_at": None,
        "cancel_initiated_at": upstream.get("cancel_initiated_at"),
        "results_url": f"{root}{PATH}/{batch.batch_id}/results" if ended else None,
    }


async def _find(request: Request[Any, Any, Any], runtime: Runtime, batch_id: str) -> StoredBatch:
    principal = await authenticate(request, runtime)
    batch = await asyncio.to_thread(runtime.batches.find_batch, batch_id, principal.team_name)
    if batch is None or batch.api != ANTHROPIC:
        raise NotFound(f"No message batch found with id '{batch_id}'.")
    return batch


@post(PATH, status_code=200)
async def create_message_batch(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Check, hold and hand over a message batch; under an Idempotency-Key, once (``batch_common.py``)."""
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    # one request against the key's and the team's rpm (a batch's tokens are the upstream's batch
    # queue's, not the per-minute token limits': they run over hours)
    admission = await runtime.limiter.admit(principal, None)
    request.state.rate_limit_headers = admission.headers
    idem = key_of(request, await request.body())
    if (replay := await kept_before(runtime, principal, idem)) is not None:
        return replay
    body = await request_json(request)
    requests = body.get("requests")
    if not isinstance(requests, list) or not requests:
        raise InvalidRequest("requests: expected a non-empty array of {custom_id, params}.", param="requests")
    checker = MessagesChecker(runtime, principal, "/v1/messages", lambda m: batch_deployment(m, ANTHROPIC_KINDS))
    for index, item in enumerate(requests):
        await checker.item(f"requests[{index}]", item, "requests")
    checked = checker.checked
    assert checked is not None  # at least one request was checked
    attribution = attribution_of(request, "messages", {})
    batch = StoredBatch(
        f"msgbatch_{uuid.uuid4().hex}",
        principal.team_name,
        principal.key_id,
        checked.model.id,
        ANTHROPIC,
        "/v1/messages",
        "",
        checked.deployment,
        "",
        "in_progress",
        checked.worst_case,
        checked.lines,
        msgspec.json.encode({"tags": dict(attribution.tags), "end_user": attribution.end_user}).decode(),
        "null",
        "{}",
        int(time.time()),
        0,
        0,
    )
    client = anthropic_client(checked.model, checked.deployment)
    try:
        made = await open_batch(runtime, batch, idem, lambda: client.create(checked.chunks(), checked.size))
    finally:
        checked.spool.close()
    if isinstance(made, Response):
        return made  # the answer kept under the Idempotency-Key
    return (await keep(runtime, principal, idem, made.batch_id, _shown(request, made)))[0]


@get(f"{PATH}/{{batch_id:str}}")
async def retrieve_message_batch(request: Request[Any, Any, Any], batch_id: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    return json_response(_shown(request, await _find(request, runtime, batch_id)))


@get(PATH)
async def list_message_batches(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    limit = page_limit(request, 20, 1000, "limit")
    after = request.query_params.get("after_id")
    found = await asyncio.to_thread(runtime.batches.list_batches, principal.team_name, ANTHROPIC, limit + 1, after)
    return json_response(page([_shown(request, b) for b in found[:limit]], len(found) > limit, openai=False))


@post(f"{PATH}/{{batch_id:str}}/cancel", status_code=200)
async def cancel_message_batch(request: Request[Any, Any, Any], batch_id: FromPath[str]) -> Response[bytes]:
    """Ask the upstream to cancel; the batch settles (charged for what it completed) once it has ended."""
    runtime: Runtime = request.app.state.runtime
    batch = await _find(request, runtime, batch_id)
    model = runtime.settings.model(batch.model)
    if not batch.settled and batch.upstream_batch_id and model is not None:
        try:
            upstream = await anthropic_client(model, batch.deployment).cancel(batch.upstream_batch_id)
        except BatchUpstreamError as exc:
            raise GatewayError(f"The upstream did not take the cancellation: {exc}", status=502) from None
        encoded = msgspec.json.encode(upstream).decode()
        if await asyncio.to_thread(runtime.batches.note_cancelling, batch.batch_id, "canceling", encoded):
            batch = replace(batch, status="canceling", upstream=encoded)  # as the upstream answered the cancel
        else:  # settled while the cancellation was on its way: as it settled
            batch = await _find(request, runtime, batch_id)
    return json_response(_shown(request, batch))


@get(f"{PATH}/{{batch_id:str}}/results")
async def message_batch_results(request: Request[Any, Any, Any], batch_id: FromPath[str]) -> Stream:
    """The ended batch's results (JSONL), streamed through from the upstream, never buffered."""
    runtime: Runtime = request.app.state.runtime
    batch = await _find(request, runtime, batch_id)
    model = runtime.settings.model(batch.model)
    if not batch.settled or model is None:
        raise InvalidRequest(f"Message batch {batch_id} has not ended yet; its results are not available.")
    opened = anthropic_client(model, batch.deployment).results(batch.upstream_batch_id)
    return await relay(opened, "The batch's results", "application/binary")
