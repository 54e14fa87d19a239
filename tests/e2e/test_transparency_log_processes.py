"""Several gateway processes on one ledger write one transparency log, each signing checkpoints in
turn, under hundreds of concurrent requests: the log never forks. The root the tests' own RFC 6962
implementation computes from every event, in the order the events were committed, is the stored
root and the last checkpoint's (as ``tollgate log checkpoint`` prints it, verified with the public
key); every kept checkpoint is the tree of its size and consistent with the next, by the gateway's
proofs; every charge's receipt is proven in the last checkpoint; ``ledger verify`` agrees."""

from __future__ import annotations

import asyncio
import base64
import json
from itertools import pairwise

from eventsourcing.persistence import StoredEvent

from app.settings_file import load_settings
from app.store.database import Sql
from app.store.event_store import open_ledger_store
from app.store.log_append import stored_leaf
from app.store.log_reads import LogReads
from domain.transparency.checkpoint import open_checkpoint
from domain.transparency.keys import signer_from_seed
from domain.transparency.receipt import open_receipt, verify_receipt
from domain.transparency.verify import verify_consistency
from tests.support import plain_http
from tests.support.backend import BACKEND
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, write_config
from tests.support.teams import Teams
from tests.unit.domain.transparency.rfc6962_reference import Reference

LOG = signer_from_seed("gateway.example.com/ledger", bytes(range(1, 33)))
#: PostgreSQL: processes append side by side, serialised on the log's size row; SQLite: one writer.
PROCESSES = 2 if BACKEND == "postgresql" else 1
REQUESTS = 240


def receipt_leaf(header: str) -> int:
    return open_receipt(header, LOG.verifier).leaf_index


def proof(gateway: Gateway, path: str, **params: int) -> list[bytes]:
    answer = plain_http.get(f"{gateway.root_url}/ledger/proof/{path}", params=params, timeout=10)
    assert answer.status_code == 200, answer.text
    return [base64.b64decode(h) for h in answer.json()["proof"]]


async def load(gateways: list[Gateway], keys: list[str]) -> list[str]:
    """Concurrent requests, each team's through every gateway; returns each charge's receipt."""
    body = {"model": "fake-gpt", "max_tokens": 10}
    async with plain_http.AsyncClient(timeout=60) as client:

        async def one(i: int) -> str:
            gateway, key = gateways[i % len(gateways)], keys[i % len(keys)]
            answer = await client.post(
                f"{gateway.base_url}/chat/completions",
                json={**body, "messages": [{"role": "user", "content": f"request {i}"}]},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert answer.status_code == 200, answer.text
            receipt: str = answer.json()["usage"]["receipt"]
            return receipt

        return list(await asyncio.gather(*(one(i) for i in range(REQUESTS))))


def test_gateway_processes_under_load_never_fork_the_log(tmp_path, fake_upstream: FakeUpstream):
    config = write_config(tmp_path, fake_upstream.base_url, redis=True)
    config.write_text(config.read_text() + "\n[transparency]\ncheckpoint_seconds = 0.2\n")
    env = {"TOLLGATE_LOG_KEY": LOG.key_string}
    gateways = [Gateway(config, env=env).start() for _ in range(PROCESSES)]
    try:
        teams = Teams(config)
        keys = [teams.open("100").key for _ in range(3)]
        teams.close()
        receipts = asyncio.run(load(gateways, keys))
        served = plain_http.get(f"{gateways[-1].root_url}/ledger/checkpoints", params={"after": 0}, timeout=10)
        kept = [open_checkpoint(n.encode(), LOG.name, [LOG.verifier]) for n in served.json()["checkpoints"]]
        assert len(kept) >= 2
        for old, new in pairwise(kept):  # each consistent with the next, by the proofs a gateway serves
            proven = proof(gateways[0], "consistency", **{"from": old.size, "to": new.size})
            verify_consistency(old.size, new.size, old.root_hash, new.root_hash, proven)
    finally:
        for gateway in gateways:
            gateway.stop()  # each signs its last events before it goes

    printed = gateways[0].cli("log", "checkpoint").stdout.encode()
    last = open_checkpoint(printed, LOG.name, [LOG.verifier])
    settings, base = load_settings(str(config))
    store = open_ledger_store(settings.database_url, base)
    sql = Sql(store.database)
    try:
        entries = [
            stored_leaf(StoredEvent(n.originator_id, n.originator_version, n.topic, n.state))
            for n in store.notifications()  # in commit order
        ]
        reads = LogReads(sql)
        head = reads.head()
        reference = Reference(entries)
        assert head.size == last.size == len(entries) >= REQUESTS
        assert head.root == last.root_hash == reference.root(len(entries))
        assert [i for i, _, _ in reads.events(0, head.size)] == list(range(head.size))  # no gap, none twice
        for checkpoint in reads.all_checkpoints():  # every kept checkpoint, the tree of its size
            assert checkpoint.root == reference.root(checkpoint.size), checkpoint.size
        for header in receipts:  # every charge in the last checkpoint, at the leaf its receipt names
            receipt = verify_receipt(header, printed, reads.inclusion(receipt_leaf(header), head.size), LOG.verifier)
            leaf = json.loads(entries[receipt.receipt.leaf_index])
            assert leaf["type"] == "domain.ledger:TeamLedger.Charged"
            assert leaf["version"] == receipt.receipt.event_version
            assert leaf["data"]["request_id"] == receipt.receipt.request_id
    finally:
        sql.close()
        store.close()
    verify = gateways[0].cli("ledger", "verify")
    assert f"Transparency log recomputed from the events: {head.size} leaves" in verify.stdout
