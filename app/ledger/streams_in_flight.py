"""The streams this process is relaying, and what each has delivered so far.

Reported with every heartbeat (``app/store/instances.py``), which asks for them on the event
loop: if the process dies mid-stream, the process that releases its holds charges each of these
streams for what it had delivered at the last report — a lower bound of what its client received,
so a crash never bills more than was sent, and no longer bills nothing at all.
"""

from __future__ import annotations

import asyncio
import logging

from app.ledger.billing import RequestBill
from app.store.instances import StreamReport
from app.tokens.delivered import Delivered
from domain.attribution import tags_text

log = logging.getLogger("tollgate.streams")


class StreamsInFlight:
    def __init__(self) -> None:
        self._streams: dict[str, tuple[RequestBill, Delivered]] = {}

    def track(self, bill: RequestBill, delivered: Delivered) -> None:
        """Follow a stream from its first frame until its hold is settled."""
        self._streams[bill.request_id] = (bill, delivered)

    def reports(self) -> list[StreamReport]:
        """What each open stream has delivered (on the event loop, where the relays write)."""
        reports = []
        for request_id, (bill, delivered) in list(self._streams.items()):
            if not bill.open:
                del self._streams[request_id]
                continue
            if not delivered:
                continue
            usage = delivered.usage()
            p = bill.principal
            reports.append(
                StreamReport(
                    request_id,
                    p.team_id.hex,
                    p.team_name,
                    p.key_id,
                    bill.model.id,
                    bill.endpoint,
                    bill.lease.lease_id if bill.lease is not None else "",
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cache_write_tokens,
                    usage.cache_hit_tokens,
                    tags_text(bill.attribution.tags),
                    bill.attribution.end_user,
                    bill.price_key,
                )
            )
        return reports

    def reports_from(self, loop: asyncio.AbstractEventLoop) -> list[StreamReport] | None:
        """``reports``, asked from another thread (the heartbeat's) of the loop the relays run on;
        None if the loop does not answer within a second (this beat then reports nothing new)."""

        async def collect() -> list[StreamReport]:
            return self.reports()

        try:
            return asyncio.run_coroutine_threadsafe(collect(), loop).result(timeout=1.0)
        except Exception:  # a report is an optimisation of what a crash costs; never fatal
            log.warning("could not collect the streams in flight for the heartbeat", exc_info=True)
            return None
