"""Whether a process may serve billed requests, and what its readiness says: the ledger, its writer,
and its heartbeat (a real store, writer, probe and registry)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from app.ledger.health import LedgerHealth
from app.ledger.writer import LedgerWriter
from app.store.event_store import LedgerStore, open_ledger_store
from app.store.instances import HEARTBEAT_SECONDS, InstanceRegistry
from app.store.probe import LedgerProbe
from tests.support.backend import new_database_url
from tests.support.outages import wait_for

DEAD_AFTER = 5.0


@pytest.fixture
def store(tmp_path) -> Iterator[LedgerStore]:
    opened = open_ledger_store(new_database_url(), tmp_path, pool_size=1)
    yield opened
    opened.close()


async def test_a_process_whose_heartbeat_went_silent_is_neither_writable_nor_ready_until_a_beat_gets_through(store):
    """A process cut off from the database past the dead-process limit may have been taken for dead
    and its leases released. Billing refused its requests until a heartbeat got through, but
    readiness said ready, so a load balancer kept sending it the traffic it would refuse."""
    registry = InstanceRegistry(store.database, shared_limits=False)
    registry.register()
    probe = LedgerProbe(store.database)
    with LedgerWriter(store) as writer:
        health = LedgerHealth(writer, probe, vouched=lambda: registry.heard_within(DEAD_AFTER))
        await health.check()
        ready, checks = health.readiness()
        assert ready
        assert health.writable
        assert checks["heartbeat"] == "ok"

        registry._last_heard = time.monotonic() - 2 * DEAD_AFTER  # its beats failed that long
        await health.check()  # the database answers the probe again before the next beat
        ready, checks = health.readiness()
        assert not ready
        assert not health.writable
        assert checks["event_store"] == "ok"
        assert checks["heartbeat"].startswith("silent")

        registry.beat()
        ready, checks = health.readiness()
        assert ready
        assert health.writable
        assert checks["heartbeat"] == "ok"
    registry.stop()
    probe.close()


async def test_once_the_database_answers_again_the_heartbeat_is_asked_for_at_once_not_at_its_next_period(store):
    """After an outage past the dead-process limit a process serves nothing billed until a beat gets
    through; waiting for the heartbeat's next period (3 s) after the probe found the database back
    kept it refusing requests for up to that long for nothing."""
    registry = InstanceRegistry(store.database, shared_limits=False)
    registry.register()  # its heartbeat thread beats every HEARTBEAT_SECONDS from here
    probe = LedgerProbe(store.database)
    with LedgerWriter(store) as writer:
        health = LedgerHealth(
            writer, probe, vouched=lambda: registry.heard_within(DEAD_AFTER), hurry=registry.beat_soon
        )
        await asyncio.sleep(0.2)  # well inside the heartbeat's first period
        registry._last_heard = time.monotonic() - 2 * DEAD_AFTER  # its beats failed that long
        asked = time.monotonic()
        await health.check()  # the probe finds the database answering
        await asyncio.to_thread(wait_for, lambda: health.writable, HEARTBEAT_SECONDS)
        assert time.monotonic() - asked < HEARTBEAT_SECONDS / 3
    registry.stop()
    probe.close()
