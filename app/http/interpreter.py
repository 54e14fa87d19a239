"""The cyclic garbage collector, set for a server whose heap is mostly built once at start.

A gateway process holds about 100,000 objects after start-up (Litestar, msgspec's types, the
configuration, the tokenizer's Python side, the ledger's aggregates) that live as long as the
process. With CPython's defaults each full (generation 2) collection walked all of them with the
event loop stopped: 40-190 ms, every few seconds under load, every request in flight waiting out
the pause (``tollgate bench --stalls``; README, "Performance"). Requests themselves leave almost no
cycles behind: what they allocate is freed by reference counting as they end.

So once the process has started: collect what start-up left behind, then move every survivor to
the permanent generation (``gc.freeze``), which collections never walk; and let the youngest
generation grow larger before it is collected, so that a collection is rarer and finds a request's
short-lived containers already freed. Cycles made later are still found: the collector still runs,
over what was made since start-up only.
"""

from __future__ import annotations

import gc

#: Net container allocations before a generation-0 collection (CPython's default is 700).
YOUNGEST = 20_000
#: Generation-0 collections per generation-1 collection, and generation-1 per full one (defaults 10, 10).
OLDER = (20, 10)


def settle_heap() -> None:
    """Start-up is over: freeze what it built, and make collections rare and small. Called once per
    process, on its event loop, before the first request (``app/http/server.py``)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNGEST, *OLDER)
