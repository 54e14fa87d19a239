"""The interpreter, set for a server: its garbage collector, and how soon threads take turns.

**The collector.** The heap is mostly built once at start.
A gateway process holds about 100,000 objects after start-up (Litestar, msgspec's types, the
configuration, the tokenizer's Python side, the ledger's aggregates) that live as long as the
process. With CPython's defaults each full (generation 2) collection walked all of them with the
event loop stopped: 40-190 ms, every few seconds under load, every request in flight waiting out
the pause (``tollgate bench --stalls``; docs/performance.md). Requests themselves leave almost no
cycles behind: what they allocate is freed by reference counting as they end.

So once the process has started: collect what start-up left behind, then move every survivor to
the permanent generation (``gc.freeze``), which collections never walk; and let the youngest
generation grow larger before it is collected, so that a collection is rarer and finds a request's
short-lived containers already freed. Cycles made later are still found: the collector still runs,
over what was made since start-up only.

**Taking turns.** The ledger writer, the projector and the snapshot thread give up the interpreter
lock while they wait for the disk or the database (a commit's flush, a round trip). When such a call
returns, the thread asks for the lock back, and the event loop — busy with requests — hands it over
only when the switch interval has passed: 5 ms by default. So every commit cost the writer 5 ms more
than its flush (a 0.3 ms commit took 5.4 ms beside a busy thread, 1.3 ms at a 1 ms interval, 0.7 ms
at 0.5 ms), every request waited for its batch's commit, and a batch waiting behind another waited
twice. The interval is the longest the loop keeps the lock while another thread wants it; at
0.5 ms it costs at most two thousand more switches a second (a few microseconds each), and only
while another thread wants the lock.
"""

from __future__ import annotations

import gc
import sys

#: Net container allocations before a generation-0 collection (CPython's default is 700).
YOUNGEST = 20_000
#: Generation-0 collections per generation-1 collection, and generation-1 per full one (defaults 10, 10).
OLDER = (20, 10)
#: Seconds the running thread keeps the interpreter lock while another thread wants it (default 0.005).
SWITCH_INTERVAL = 0.0005


def settle_interpreter() -> None:
    """Start-up is over: freeze what it built, make collections rare and small, and let the threads
    that wait on the disk take their turn soon. Called once per process, on its event loop, before
    the first request (``app/http/server.py``)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNGEST, *OLDER)
    sys.setswitchinterval(SWITCH_INTERVAL)
