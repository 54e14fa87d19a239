"""After start-up the heap is frozen, so full collections no longer walk it with the loop stopped."""

from __future__ import annotations

import gc

import pytest

from app.http import heap


@pytest.fixture
def restored_collector():
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_settling_freezes_what_start_up_built_and_makes_collections_rarer(restored_collector):
    built_at_start = [{"n": i} for i in range(1_000)]
    heap.settle_heap()
    assert gc.get_freeze_count() >= len(built_at_start)
    assert gc.get_threshold() == (heap.YOUNGEST, *heap.OLDER)
    tracked = len(gc.get_objects())
    assert tracked < gc.get_freeze_count() / 2  # a full collection walks only what came after


def test_cycles_made_after_start_up_are_still_collected(restored_collector):
    heap.settle_heap()

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # type: ignore[attr-defined]
    del a, b
    assert gc.collect() >= 2

