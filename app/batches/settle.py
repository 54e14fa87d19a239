"""A batch the upstream says has ended is settled: each line of its output charged from the line's
own usage at the model's batch price, then the rest of its hold released.

The output file is read as a stream, a line at a time (it can be 100 MB); each line's charge is a
``Charged`` event with the batch's id and the line's ``custom_id``. Settling again — after the
process settling it was killed half-way — charges nothing twice: a line already charged is refused
by the ledger (``AlreadyCharged``) and counted as it was charged, and once the hold is released
(``HoldNotFound``) the batch's money is done. A cancelled or expired batch is charged for the lines
it completed, which are the lines its output file holds (the lines it never ran are in its error
file, OpenAI's, or ``canceled`` / ``expired`` results, Anthropic's: nothing to charge). A line of a
batch of embeddings is charged its ``usage.prompt_tokens`` as input tokens.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import msgspec

from app.batches.deployments import anthropic_client, openai_client
from app.batches.objects import FINAL
from app.ledger.durable import durable
from app.ledger.results import Charged
from app.ledger.service import LedgerService, TeamRequest
from app.store.batch_store import PROCESSED, BatchStore, StoredBatch, StoredFile
from app.translate.chat.upstream import usage_from_openai
from app.translate.messages.upstream import usage_from_anthropic
from domain import endpoints
from domain.ledger import AlreadyCharged, HoldNotFound, team_id
from domain.ledger_holds import BatchLine
from domain.prices import PriceSource
from domain.settings import Settings
from domain.usage import TokenUsage

log = logging.getLogger("tollgate")

#: The Batch API's endpoint of a batch of embeddings (``app/http/batch_lines.py`` checks its lines).
EMBEDDINGS_PATH = "/v1/embeddings"
#: Line charges in flight at once (the writer commits them in groups).
PIPELINE = 256


@dataclass(frozen=True, slots=True)
class SettleWith:
    """What settling a batch needs of the running gateway."""

    settings: Settings
    store: BatchStore
    ledger: LedgerService
    prices: PriceSource
    #: Called every so many lines: False once this process no longer has the batch's turn.
    still_mine: Callable[[], bool]


def batch_request(batch: StoredBatch) -> TeamRequest:
    """The batch as the ledger records its hold and its lines' charges: the key that made it, its
    model, and its attribution (tags and end user, given when it was created)."""
    attribution: dict[str, Any] = msgspec.json.decode(batch.attribution or "{}")
    return TeamRequest(
        team_id(batch.team_name),
        batch.team_name,
        batch.batch_id,
        batch.key_id,
        batch.model,
        endpoints.BATCHES,
        attribution.get("tags") or {},
        attribution.get("end_user") or "",
    )


def _openai_line(raw: bytes) -> tuple[str, dict[str, Any] | None]:
    """An OpenAI batch output line's ``custom_id`` and its answer's body (None: the line failed)."""
    try:
        line = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return "", None
    if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
        return "", None
    response = line.get("response")
    if (
        not isinstance(response, dict)
        or response.get("status_code") != 200
        or not isinstance(response.get("body"), dict)
    ):
        return line["custom_id"], None
    return line["custom_id"], response["body"]


def line_of_openai(raw: bytes) -> tuple[str, TokenUsage | None]:
    """An OpenAI batch output line's ``custom_id`` and the usage to charge (None: the line failed,
    or reports no usage: nothing to charge)."""
    custom_id, body = _openai_line(raw)
    if body is None:
        return custom_id, None
    return custom_id, usage_from_openai(body.get("usage"), body.get("service_tier"))


def line_of_embeddings(raw: bytes) -> tuple[str, TokenUsage | None]:
    """An embeddings batch's output line: its input tokens (``usage.prompt_tokens``; an embedding
    has no output tokens) to charge, as ``POST /v1/embeddings`` charges them."""
    custom_id, body = _openai_line(raw)
    usage = body.get("usage") if body is not None else None
    prompt = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    if not isinstance(prompt, int) or isinstance(prompt, bool) or prompt < 0:
        return custom_id, None
    return custom_id, TokenUsage(input_tokens=prompt)


def line_of_anthropic(raw: bytes) -> tuple[str, TokenUsage | None]:
    """An Anthropic batch result's ``custom_id`` and the usage to charge (None: it did not succeed)."""
    try:
        line = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return "", None
    if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
        return "", None
    result = line.get("result")
    if not isinstance(result, dict) or result.get("type") != "succeeded" or not isinstance(result.get("message"), dict):
        return line["custom_id"], None
    return line["custom_id"], usage_from_anthropic(result["message"].get("usage"))


class Charging:
    """The charges of one batch's lines, pipelined through the ledger writer, and their total."""

    def __init__(self, with_: SettleWith, batch: StoredBatch) -> None:
        self._with = with_
        self._batch = batch
        self._request = batch_request(batch)
        self._pending: list[tuple[str, Future[Charged]]] = []
        self.total = 0
        self.lines = 0
        self.settled_before = False

    async def charge(self, custom_id: str, usage: TokenUsage) -> None:
        line = BatchLine(custom_id, self._batch.model, usage)
        charging = self._with.ledger.charge_batch_line(
            self._request, line, self._with.prices, self._with.settings.credits_per_usd
        )
        self._pending.append((line.request_id(self._batch.batch_id), charging))
        if len(self._pending) >= PIPELINE:
            await self.flush()

    async def flush(self) -> None:
        pending, self._pending = self._pending, []
        for request_id, charging in pending:
            try:
                charged = await durable(charging)
                self.total += charged.event.charged
            except AlreadyCharged:  # charged before this process was killed: counted as it was charged
                found = await asyncio.to_thread(self._with.ledger.recorded_charge, self._request.team_id, request_id)
                self.total += found.charged if found is not None else 0
            except HoldNotFound:  # the batch's hold was already released: it was settled before
                self.settled_before = True
            self.lines += 1


#: The batch APIs (``gateway_batches.api``).
OPENAI = "openai"
ANTHROPIC = "anthropic"
#: A line's custom id and its usage to charge (None: nothing to charge), from its raw JSON.
LineParser = Callable[[bytes], tuple[str, TokenUsage | None]]


def final_status(api: str, upstream: dict[str, Any]) -> str | None:
    """The status a batch ended with upstream (None: it runs still): OpenAI's ``completed``,
    ``failed``, ``expired``, ``cancelled``; Anthropic's ``ended``."""
    if api == ANTHROPIC:
        return "ended" if upstream.get("processing_status") == "ended" else None
    status = str(upstream.get("status"))
    return status if status in FINAL else None


async def settle(with_: SettleWith, batch: StoredBatch, upstream: dict[str, Any]) -> None:
    """Charge every line of the ended batch's output, release the rest of its hold, keep its output
    and error files (OpenAI's), and mark it settled with the upstream's final status."""
    status = final_status(batch.api, upstream)
    if status is None:
        raise ValueError(f"batch {batch.batch_id} has not ended")
    model = with_.settings.model(batch.model)
    if model is None:
        raise ValueError(f"batch {batch.batch_id}: model {batch.model!r} is no longer configured")
    charging = Charging(with_, batch)
    files: list[tuple[str, str, int]] = []
    if batch.api == ANTHROPIC:
        async with anthropic_client(model, batch.deployment).results(batch.upstream_batch_id) as response:
            await _charge_stream(with_, batch, charging, response.aiter_bytes(), line_of_anthropic)
    else:
        client = openai_client(model, batch.deployment)
        for key in ("output_file_id", "error_file_id"):
            upstream_file = upstream.get(key)
            if not isinstance(upstream_file, str) or not upstream_file:
                continue
            async with client.content(upstream_file) as response:
                parse = _output_parser(batch) if key == "output_file_id" else None
                size = await _charge_stream(with_, batch, charging, response.aiter_bytes(), parse)
            files.append((key.removesuffix("_file_id"), upstream_file, size))
    await charging.flush()
    released = await durable(with_.ledger.settle_batch(batch_request(batch), status))
    for kind, upstream_file, size in files:
        await asyncio.to_thread(_keep_output_file, with_.store, batch, kind, upstream_file, size)
    await asyncio.to_thread(
        with_.store.update_batch,
        batch.batch_id,
        status=status,
        upstream=msgspec.json.encode(upstream).decode(),
        settled=1,
        charged=charging.total,
    )
    log.info(
        "batch %s settled (%s): %d line(s) charged %d micro-credits, %d released",
        batch.batch_id,
        status,
        charging.lines,
        charging.total,
        released,
    )


def _output_parser(batch: StoredBatch) -> LineParser:
    """How an OpenAI batch's output lines are read, by the endpoint its lines called."""
    return line_of_embeddings if batch.endpoint == EMBEDDINGS_PATH else line_of_openai


async def _charge_stream(
    with_: SettleWith, batch: StoredBatch, charging: Charging, chunks: AsyncIterator[bytes], parse: LineParser | None
) -> int:
    """Charge each line of a streamed output (``parse``: None, an error file, only counted); its size."""
    size, read, pending = 0, 0, b""
    async for chunk in chunks:
        size += len(chunk)
        if parse is None:
            continue
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            await _charge_line(charging, raw, parse)
            read += 1
            if read % 1000 == 0 and not await asyncio.to_thread(with_.still_mine):
                raise RuntimeError(f"batch {batch.batch_id}: another process took over its settlement")
    if parse is not None and pending.strip():
        await _charge_line(charging, pending, parse)
    return size


async def _charge_line(charging: Charging, raw: bytes, parse: LineParser) -> None:
    if not raw.strip():
        return
    custom_id, usage = parse(raw)
    if custom_id and usage is not None and usage.total_tokens:
        await charging.charge(custom_id, usage)


def _keep_output_file(store: BatchStore, batch: StoredBatch, kind: str, upstream_file_id: str, size: int) -> None:
    """The team's own id for an output (or error) file of its batch, whose bytes stay upstream."""
    if store.output_file(batch.batch_id, upstream_file_id) is not None:
        return
    store.add_file(
        StoredFile(
            f"file-{uuid.uuid4().hex}",
            batch.team_name,
            "batch_output",
            f"{batch.batch_id}_{kind}.jsonl",
            size,
            int(time.time()),
            PROCESSED,
            batch.batch_id,
            upstream_file_id,
        )
    )
