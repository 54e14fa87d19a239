"""A cancellation's answer recorded on a batch: never over a batch its poller settled meanwhile."""

from __future__ import annotations

import pytest

from app.store.batch_store import BatchStore, StoredBatch
from app.store.database import Database
from app.store.event_store import open_ledger_store
from tests.support.backend import new_database_url


@pytest.fixture
def store(tmp_path) -> BatchStore:
    ledger = open_ledger_store(new_database_url(), tmp_path)
    ledger.close()
    database: Database = ledger.database
    batches = BatchStore(database)
    yield batches
    batches.close()


def _batch(batch_id: str) -> StoredBatch:
    return StoredBatch(
        batch_id=batch_id, team_name="acme", key_id="k1", model="gpt", api="openai", endpoint="/v1/chat/completions",
        input_file_id="file-1", deployment=0, upstream_batch_id="up-1", status="in_progress", hold=1000, lines=3,
        attribution="{}", metadata="{}", upstream="{}", created_at=1, settled=0, charged=0,
    )  # fmt: skip


def test_an_open_batch_takes_the_cancellations_answer(store):
    store.add_batch(_batch("batch_open"))
    assert store.note_cancelling("batch_open", "cancelling", '{"status":"cancelling"}')
    found = store.find_batch("batch_open")
    assert found is not None
    assert (found.status, found.upstream) == ("cancelling", '{"status":"cancelling"}')


def test_a_batch_settled_while_the_cancellation_was_on_its_way_keeps_its_end(store):
    """Its poller settled it between the cancel's check and its answer: writing ``cancelling`` over
    it would show the batch cancelling for ever (a settled batch is polled no more)."""
    store.add_batch(_batch("batch_done"))
    store.update_batch("batch_done", status="cancelled", upstream='{"status":"cancelled"}', settled=1, charged=750)
    assert not store.note_cancelling("batch_done", "cancelling", '{"status":"cancelling"}')
    found = store.find_batch("batch_done")
    assert found is not None
    ended = (found.status, found.upstream, found.settled, found.charged)
    assert ended == ("cancelled", '{"status":"cancelled"}', 1, 750)
