"""After start-up the heap is frozen, so full collections no longer walk it with the loop stopped;
and a thread back from the disk gets the interpreter lock soon from a busy event loop."""

from __future__ import annotations

import gc
import sys
import threading
import time

import pytest

from app.http import interpreter


@pytest.fixture
def restored_collector():
    thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    sys.setswitchinterval(interval)


def test_settling_freezes_what_start_up_built_and_makes_collections_rarer(restored_collector):
    built_at_start = [{"n": i} for i in range(1_000)]
    interpreter.settle_interpreter()
    assert gc.get_freeze_count() >= len(built_at_start)
    assert gc.get_threshold() == (interpreter.YOUNGEST, *interpreter.OLDER)
    tracked = len(gc.get_objects())
    assert tracked < gc.get_freeze_count() / 2  # a full collection walks only what came after


def test_cycles_made_after_start_up_are_still_collected(restored_collector):
    interpreter.settle_interpreter()

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # type: ignore[attr-defined]
    del a, b
    assert gc.collect() >= 2


def test_a_thread_back_from_a_wait_gets_the_lock_soon_from_a_busy_thread(restored_collector):
    """What a ledger commit went through: a 0.3 ms wait outside the lock, then the lock back from a
    thread that never gives it up by itself. At the default 5 ms interval the wait took 5 ms."""
    interpreter.settle_interpreter()
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            pass

    spinner = threading.Thread(target=busy)
    spinner.start()
    try:
        waits = []
        for _ in range(40):
            started = time.perf_counter()
            time.sleep(0.0003)  # gives up the lock, as a commit's flush does
            waits.append(time.perf_counter() - started)
    finally:
        stop.set()
        spinner.join()
    waits.sort()
    assert waits[len(waits) // 2] < 0.003
