"""OpenAI's Batch API: ``/v1/batches`` create, retrieve, list and cancel, for ``openai`` upstreams.

Creating a batch checks every line of its input file as the same request sent alone would be
(``app/http/batch_lines.py``; one bad line refuses the batch, naming it), holds every line's worst
case at the model's batch price in one hold (shown on ``/v1/credits``; 402 if the balance or a
budget cannot cover it), uploads the mapped lines to the upstream and creates the batch there. The
pollers (``app/batches/poller.py``) charge each line from the output file's own usage when the
upstream says it ended, and release the rest.
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

from app.batches.deployments import OPENAI_KINDS, batch_deployment, openai_client
from app.batches.objects import batch_object
from app.errors import GatewayError, InvalidRequest, NotFound
from app.http.attribution import attribution_of
from app.http.batch_lines import BATCH_ENDPOINTS, LineChecker, split_lines
from app.http.routes.admin_common import json_response
from app.http.routes.auth import authenticate
from app.http.routes.batch_common import keep, kept_before, key_of, open_batch, page, page_limit
from app.http.routes.request_body import request_json
from app.runtime import Runtime
from app.store.batch_store import StoredBatch
from app.upstream.batch_errors import BatchUpstreamError

OPENAI = "openai"


def _no_batch(batch_id: str) -> NotFound:
    return NotFound(f"No batch found with id '{batch_id}'.", param="batch_id")


async def _shown(runtime: Runtime, batch: StoredBatch) -> dict[str, Any]:
    """The batch as OpenAI shows it, with the team's own ids for its output and error files."""
    upstream: dict[str, Any] = msgspec.json.decode(batch.upstream or "{}")
    ids: list[str | None] = []
    for key in ("output_file_id", "error_file_id"):
        upstream_file = upstream.get(key) if batch.settled else None
        found = (
            await asyncio.to_thread(runtime.batches.output_file, batch.batch_id, upstream_file)
            if isinstance(upstream_file, str) and upstream_file
            else None
        )
        ids.append(found.file_id if found is not None else None)
    return batch_object(batch, ids[0], ids[1])


def _create_fields(body: dict[str, Any]) -> tuple[str, str, str, dict[str, str]]:
    input_file_id, endpoint = body.get("input_file_id"), body.get("endpoint")
    window, metadata = body.get("completion_window", "24h"), body.get("metadata") or {}
    if not isinstance(input_file_id, str) or not input_file_id:
        raise InvalidRequest("Missing required parameter: 'input_file_id'.", param="input_file_id")
    if endpoint not in BATCH_ENDPOINTS:
        raise InvalidRequest(
            f"Invalid 'endpoint': this gateway runs batches of {', '.join(BATCH_ENDPOINTS)}.", param="endpoint"
        )
    if window != "24h":
        raise InvalidRequest("Invalid 'completion_window': expected '24h'.", param="completion_window")
    if (
        not isinstance(metadata, dict)
        or len(metadata) > 16
        or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= 64 and len(v) <= 512 for k, v in metadata.items()
        )
    ):
        raise InvalidRequest(
            "Invalid 'metadata': at most 16 pairs of strings (keys up to 64 characters, values up to 512).",
            param="metadata",
        )
    return input_file_id, str(endpoint), window, metadata


@post("/v1/batches", status_code=200)
async def create_batch(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Check, hold and hand over a batch; under an Idempotency-Key, once (``batch_common.py``)."""
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    # one request against the key's and the team's rpm (a batch's tokens are the upstream's batch
    # queue's, not the per-minute token limits': they run over hours)
    admission = await runtime.limiter.admit(principal, None)
    request.state.rate_limit_headers = admission.headers
    idem = key_of(request, await request.body())
    if (replay := await kept_before(runtime, principal, idem)) is not None:
        return replay
    input_file_id, endpoint, window, metadata = _create_fields(await request_json(request))
    attribution = attribution_of(request, "chat", {"user": metadata.get("user")} if "user" in metadata else {})
    source = await asyncio.to_thread(runtime.batches.find_file, principal.team_name, input_file_id)
    if source is None or source.purpose != "batch":
        raise NotFound(f"No such File object: {input_file_id}", param="input_file_id")
    checker = LineChecker(runtime, principal, endpoint, lambda model: batch_deployment(model, OPENAI_KINDS))
    number = 0
    async for raw in split_lines(runtime.batches.chunks(source.file_id)):
        number += 1
        await checker.line(number, raw)
    checked = checker.checked
    if checked is None:
        raise InvalidRequest("The input file has no requests.", param="input_file_id")
    batch = StoredBatch(
        f"batch_{uuid.uuid4().hex}",
        principal.team_name,
        principal.key_id,
        checked.model.id,
        OPENAI,
        endpoint,
        input_file_id,
        checked.deployment,
        "",
        "validating",
        checked.worst_case,
        checked.lines,
        msgspec.json.encode({"tags": dict(attribution.tags), "end_user": attribution.end_user}).decode(),
        msgspec.json.encode(metadata).decode(),
        "{}",
        int(time.time()),
        0,
        0,
    )
    client = openai_client(checked.model, checked.deployment)

    async def send() -> dict[str, Any]:
        upstream_file = await client.upload(f"{batch.batch_id}.jsonl", checked.chunks(), checked.size)
        return await client.create(upstream_file, endpoint, window, {"tollgate_batch": batch.batch_id})

    try:
        made = await open_batch(runtime, batch, idem, send)
    finally:
        checked.spool.close()
    if isinstance(made, Response):
        return made  # the answer kept under the Idempotency-Key
    return (await keep(runtime, principal, idem, made.batch_id, await _shown(runtime, made)))[0]


@get("/v1/batches/{batch_id:str}")
async def retrieve_batch(request: Request[Any, Any, Any], batch_id: FromPath[str]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    batch = await asyncio.to_thread(runtime.batches.find_batch, batch_id, principal.team_name)
    if batch is None or batch.api != OPENAI:
        raise _no_batch(batch_id)
    return json_response(await _shown(runtime, batch))


@get("/v1/batches")
async def list_batches(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    limit = page_limit(request, 20, 100)
    after = request.query_params.get("after")
    found = await asyncio.to_thread(runtime.batches.list_batches, principal.team_name, OPENAI, limit + 1, after)
    return json_response(page([await _shown(runtime, b) for b in found[:limit]], len(found) > limit))


@post("/v1/batches/{batch_id:str}/cancel", status_code=200)
async def cancel_batch(request: Request[Any, Any, Any], batch_id: FromPath[str]) -> Response[bytes]:
    """Ask the upstream to cancel; the batch settles (charged for what it completed) when it says cancelled."""
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    batch = await asyncio.to_thread(runtime.batches.find_batch, batch_id, principal.team_name)
    if batch is None or batch.api != OPENAI:
        raise _no_batch(batch_id)
    model = runtime.settings.model(batch.model)
    if not batch.settled and batch.upstream_batch_id and model is not None:
        try:
            upstream = await openai_client(model, batch.deployment).cancel(batch.upstream_batch_id)
        except BatchUpstreamError as exc:
            raise GatewayError(f"The upstream did not take the cancellation: {exc}", status=502) from None
        status = str(upstream.get("status") or "cancelling")
        shown = "cancelling" if status in ("cancelled", "cancelling") else status
        encoded = msgspec.json.encode(upstream).decode()
        if await asyncio.to_thread(runtime.batches.note_cancelling, batch.batch_id, shown, encoded):
            batch = replace(batch, status=shown, upstream=encoded)  # as the upstream answered the cancel
        else:  # settled while the cancellation was on its way: as it settled
            batch = await asyncio.to_thread(runtime.batches.find_batch, batch_id) or batch
    return json_response(await _shown(runtime, batch))
