"""Polls every open batch upstream until it ends, then settles it (``app/batches/settle.py``).

Every gateway process runs a poller; each batch is polled by one of them at a time, the one holding
the lease on its row (``BatchStore.claim``), renewed at every poll. A process that dies (``kill -9``)
or restarts leaves its lease to lapse, and the next poller to look takes the batch over — the batch's
state is in the database and its money in the ledger, nothing in any process's memory — so a batch
is always settled, and its lines charged once, whichever process ends up doing it.

A batch created but never handed to the upstream (its process died in between) would hold its
credits for ever: after :data:`ORPHAN_SECONDS` without an upstream id it is released as ``failed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import replace

import msgspec

from app.batches.deployments import anthropic_client, openai_client
from app.batches.objects import status_while_open
from app.batches.settle import ANTHROPIC, SettleWith, batch_request, final_status, settle
from app.ledger.durable import durable
from app.store.batch_store import StoredBatch
from app.upstream.batch_errors import BatchUpstreamError

log = logging.getLogger("tollgate")

#: Seconds after which a batch that never reached the upstream is released.
ORPHAN_SECONDS = 600


class BatchPoller:
    def __init__(self, with_: SettleWith, owner: Callable[[], str], interval: float) -> None:
        self._with = with_
        self._owner = owner
        self.interval = interval
        #: How long a poll's turn lasts: a poller that stops renewing it is taken over after this.
        self.lease = 3 * interval + 2

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.poll_all()
            except Exception:  # the next round tries again; a poller never stops
                log.exception("polling the batches failed")

    async def poll_all(self) -> None:
        for batch in await asyncio.to_thread(self._with.store.open_batches):
            if await asyncio.to_thread(self._claim, batch.batch_id):
                try:
                    await self.poll(batch)
                except (BatchUpstreamError, RuntimeError) as exc:
                    log.warning("batch %s: %s", batch.batch_id, exc)

    def _claim(self, batch_id: str) -> bool:
        now = time.time()
        return self._with.store.claim(batch_id, self._owner(), now, now + self.lease)

    async def poll(self, batch: StoredBatch) -> None:
        """Read the batch's state upstream; settle it once it has ended."""
        if not batch.upstream_batch_id:
            if time.time() - batch.created_at > ORPHAN_SECONDS:
                await durable(self._with.ledger.settle_batch(batch_request(batch), "failed"))
                await asyncio.to_thread(self._with.store.update_batch, batch.batch_id, status="failed", settled=1)
            return
        model = self._with.settings.model(batch.model)
        if model is None:
            log.error("batch %s: model %r is no longer configured; it is not polled", batch.batch_id, batch.model)
            return
        if batch.api == ANTHROPIC:
            upstream = await anthropic_client(model, batch.deployment).retrieve(batch.upstream_batch_id)
            shown = "in_progress" if final_status(batch.api, upstream) else str(upstream.get("processing_status"))
        else:
            upstream = await openai_client(model, batch.deployment).retrieve(batch.upstream_batch_id)
            shown = status_while_open(str(upstream.get("status") or ""))
        await asyncio.to_thread(
            self._with.store.update_batch,
            batch.batch_id,
            status=shown,
            upstream=msgspec.json.encode(upstream).decode(),
        )
        if final_status(batch.api, upstream) is not None:
            still_mine = lambda: self._claim(batch.batch_id)  # noqa: E731 - renews the turn as it asks
            await settle(replace(self._with, still_mine=still_mine), batch, upstream)


async def stop(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
