"""What the batch and file routes share (``files.py``, ``batches.py``, ``message_batches.py``): a list's
page (its ``limit`` read and bounded, its object in each API's shape), an upstream file relayed as a
stream, and a batch or file made once under an Idempotency-Key.

Making a batch or a file charges nothing, so the answer to keep under an Idempotency-Key (the batch
or file object as first answered) is kept when the thing is made, not with a charge as a generation's
is (``app/ledger/billing.py``); retries within ``idempotency_ttl`` get that answer, byte for byte,
with ``idempotent-replayed: true``, and nothing is made again. A batch's hold is placed under the
key, so while its batch is being made another attempt is refused (409, to retry, as a generation
running under the key is); a file's upload is read and hashed first (its bytes are what the key is
compared by), and of two attempts racing, the first kept wins and the other's copy is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec
from litestar import Request, Response
from litestar.response import Stream

from app.batches.settle import batch_request
from app.errors import GatewayError, InvalidRequest, NotFound, UpstreamFailure
from app.http.billed_request import idempotency_of
from app.http.refusals import answered_over_http
from app.json import encode
from app.keys import Principal
from app.ledger.billing import Idempotency
from app.ledger.durable import durable
from app.ledger.refusals import IdempotencyKeyReused
from app.runtime import Runtime
from app.store.batch_store import StoredBatch
from app.store.read_models import IdempotentResponse
from app.upstream.batch_errors import BatchUpstreamError

#: A batch object as its API shows it, made from its row.
Shown = Callable[[StoredBatch], Awaitable[dict[str, Any]]]


def page_limit(request: Request[Any, Any, Any], default: int, largest: int, name: str = "'limit'") -> int:
    """The list's ``limit`` query parameter, clamped to 1..``largest`` (``name``: as the API's errors
    spell a parameter)."""
    try:
        return min(largest, max(1, int(request.query_params.get("limit", str(default)))))
    except ValueError:
        raise InvalidRequest(f"Invalid {name}: expected a whole number.", param="limit") from None


def page(data: list[dict[str, Any]], has_more: bool, *, openai: bool = True) -> dict[str, Any]:
    """A page of a list, in OpenAI's shape (``object: list``) or Anthropic's."""
    listed = {
        "data": data,
        "has_more": has_more,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }
    return {"object": "list", **listed} if openai else listed


async def relay(
    opened: contextlib.AbstractAsyncContextManager[httpx.Response], unreadable: str, media_type: str
) -> Stream:
    """An upstream file (an output file, a batch's results) streamed through as it arrives, never
    held; a 404 saying ``unreadable`` if the upstream will not give it now."""
    try:
        response = await opened.__aenter__()
    except BatchUpstreamError as exc:
        raise NotFound(f"{unreadable} cannot be read upstream now ({exc}).", param="id") from None

    async def chunks() -> AsyncIterator[bytes]:
        try:
            async for chunk in response.aiter_bytes():
                yield chunk
        finally:
            await opened.__aexit__(None, None, None)

    return Stream(chunks(), media_type=media_type)


def iso(seconds: int | None) -> str | None:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z") if seconds else None


# -- made once under an Idempotency-Key ------------------------------------------------------------


def key_of(request: Request[Any, Any, Any], digest: bytes = b"") -> Idempotency | None:
    """The request's Idempotency-Key and the hash of ``digest`` (its body, or an upload's digest)."""
    return idempotency_of(request, digest)


def replayed(stored: IdempotentResponse, idem: Idempotency) -> Response[bytes]:
    """The answer kept under the key, as first sent; 409 if the key was used for another request."""
    if stored.body_hash != idem.body_hash:
        with answered_over_http():
            raise IdempotencyKeyReused
    return Response(stored.response, media_type=stored.content_type, headers={"idempotent-replayed": "true"})


async def kept_before(runtime: Runtime, principal: Principal, idem: Idempotency | None) -> Response[bytes] | None:
    """The answer kept under the request's key, if any (a read: a retry of a batch already made need
    not read and check its input again)."""
    if idem is None:
        return None
    stored = await asyncio.to_thread(runtime.ledger.stored_answer, principal.team_id, idem.key)
    return replayed(stored, idem) if stored is not None else None


async def keep(
    runtime: Runtime, principal: Principal, idem: Idempotency | None, made_id: str, body: dict[str, Any]
) -> tuple[Response[bytes], bool]:
    """The answer to a request that made ``made_id``, kept under its key (if it has one), and whether
    it is this request's: False when another attempt under the key kept its answer first."""
    content = encode(body)
    answer = Response(content, media_type="application/json")
    if idem is None:
        return answer, True
    now = time.time()
    mine = IdempotentResponse(
        principal.team_id,
        idem.key,
        idem.body_hash,
        made_id,
        "application/json",
        content,
        datetime.fromtimestamp(now, UTC).isoformat(),
        now + float(runtime.settings.idempotency_ttl),
    )
    kept = await asyncio.to_thread(runtime.ledger.keep_answer, mine)
    if kept is None or kept.request_id == made_id:
        return answer, True
    return replayed(kept, idem), False


def body_hash(*parts: bytes) -> bytes:
    """A digest of an upload's parts, each length-prefixed: what its key is compared by, whatever
    multipart boundary the client chose."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.digest()


async def open_batch(
    runtime: Runtime,
    batch: StoredBatch,
    idem: Idempotency | None,
    send: Callable[[], Awaitable[dict[str, Any]]],
) -> StoredBatch | Response[bytes]:
    """Hold the batch's worst case (402 with what is available, 403 suspended, as any request's hold;
    under a key: the key's kept answer instead, or 409 while its batch is being made), record it,
    and hand it to the upstream (``send``); the batch as recorded with its upstream id. If the
    upstream refuses it, its hold is released at once and the refusal answered (502)."""
    with answered_over_http():
        held = await durable(
            runtime.ledger.submit_batch(batch_request(batch), batch.hold, idem_key=idem.key if idem else "")
        )
    if held.stored_answer is not None and idem is not None:
        return replayed(held.stored_answer, idem)
    await asyncio.to_thread(runtime.batches.add_batch, batch)
    try:
        upstream = await send()
    except BatchUpstreamError as exc:
        await durable(runtime.ledger.settle_batch(batch_request(batch), "failed"))
        await asyncio.to_thread(runtime.batches.update_batch, batch.batch_id, status="failed", settled=1)
        raise UpstreamFailure(f"The upstream refused the batch: {exc}") from None
    fields = {"upstream_batch_id": str(upstream.get("id")), "upstream": msgspec.json.encode(upstream).decode()}
    await asyncio.to_thread(runtime.batches.update_batch, batch.batch_id, **fields)
    stored = await asyncio.to_thread(runtime.batches.find_batch, batch.batch_id)
    if stored is None:
        raise GatewayError(f"The batch {batch.batch_id} was made but cannot be read back.", status=500)
    return stored
