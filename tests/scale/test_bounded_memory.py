"""The tools that read the whole history (verify, rebuild, export) hold a page of it at a time.

One team with 20,000 events (a hold and a charge per request, a snapshot every 500 events) is read
by each tool under ``tracemalloc``: the peak of what it allocates must stay under a third of what
the team's audit history takes as one list (about 13 MB), which export and verify used to hold. The
tools peak at 2 to 3 MB whatever the history's length: a page of events and a page of entries.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from app.ledger.queries import export_chunks, export_upto
from app.store.event_store import LedgerStore, open_ledger_store
from app.store.snapshots import SNAPSHOT_EVERY
from projections.audit import verify_ledger
from projections.history import HistoryProjection
from tests.support.backend import new_database_url
from tests.support.long_history import build_history

T = TypeVar("T")
REQUESTS = 10_000


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerStore]:
    base: Path = tmp_path_factory.mktemp("long")
    opened = open_ledger_store(new_database_url(), base, pool_size=2)
    build_history(opened, {"big": REQUESTS, "small": 50}, batch=1000, snapshot_every=500)
    history = HistoryProjection(opened, opened.database)
    history.catch_up(batch=1000)
    history.close()
    yield opened
    opened.close()


def _peak(work: Callable[[], T]) -> tuple[T, int]:
    """What ``work`` returns, and the most memory it had allocated at once (bytes)."""
    gc.collect()
    tracemalloc.start()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def whole_history(store: LedgerStore) -> int:
    """What the big team's audit history takes as one list of rows."""
    history = HistoryProjection(store, store.database)
    rows: list[dict[str, Any]]
    rows, peak = _peak(lambda: history.entries(team="big"))
    history.close()
    assert len(rows) == REQUESTS + 3  # its charges, its top-up, and its opening and key issue (operator's rows)
    return peak


def test_export_holds_a_page_at_a_time(store: LedgerStore, whole_history: int):
    upto = export_upto(store)

    def export() -> int:
        return sum(len(chunk) for chunk in export_chunks(store, "big", "csv", upto))

    written, peak = _peak(export)
    assert written > 100 * REQUESTS  # every line was written
    assert peak < whole_history / 3, f"export peaked at {peak:,} bytes; the history as a list is {whole_history:,}"


def test_verify_holds_a_page_at_a_time(store: LedgerStore, whole_history: int):
    report, peak = _peak(lambda: verify_ledger(store, store.database))
    assert report.ok, report.problems
    assert report.events > 2 * REQUESTS
    assert report.snapshots == store.team_snapshots.count() > 0
    assert peak < whole_history / 3, f"verify peaked at {peak:,} bytes; the history as a list is {whole_history:,}"


def test_rebuild_holds_a_page_at_a_time(store: LedgerStore, whole_history: int):
    history = HistoryProjection(store, store.database)
    read, peak = _peak(history.rebuild)
    history.close()
    assert read > 2 * REQUESTS
    assert store.team_snapshots.count() == (2 * REQUESTS + 3) // SNAPSHOT_EVERY  # the default interval, every team
    assert peak < whole_history / 3, f"rebuild peaked at {peak:,} bytes; the history as a list is {whole_history:,}"
