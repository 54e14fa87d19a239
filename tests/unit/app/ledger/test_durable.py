"""A ledger command's answer awaited on the event loop (app/ledger/durable.py): a batch of answers
completed on the writer's thread wakes the loop once; every caller gets its own value or refusal;
a caller that is cancelled stops waiting without touching the command; none is ever lost when
answers arrive while the loop is handing others over."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from concurrent.futures import Future

import pytest

from app.ledger.durable import durable


class Refused(Exception):
    pass


def complete_on_a_thread(futures: list[Future[int]], *, refuse: frozenset[int] = frozenset()) -> threading.Thread:
    """Complete the futures one after another on another thread, as the writer does after a commit."""

    def run() -> None:
        for i, future in enumerate(futures):
            if i in refuse:
                future.set_exception(Refused(i))
            else:
                future.set_result(i)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


async def test_a_batch_of_answers_wakes_the_loop_once_and_each_caller_gets_its_own():
    loop = asyncio.get_running_loop()
    wakeups = 0
    real = loop.call_soon_threadsafe

    def counted(*args, **kwargs):
        nonlocal wakeups
        wakeups += 1
        return real(*args, **kwargs)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
    try:
        futures: list[Future[int]] = [Future() for _ in range(64)]
        waiting = [asyncio.ensure_future(durable(f)) for f in futures]
        await asyncio.sleep(0)  # every caller is waiting
        # The loop does not run while the thread completes the batch (it waits for the thread here).
        complete_on_a_thread(futures, refuse=frozenset({5, 40})).join()
        results = await asyncio.gather(*waiting, return_exceptions=True)
    finally:
        del loop.call_soon_threadsafe
    assert wakeups == 1
    assert [r.args[0] if isinstance(r, Refused) else r for r in results] == list(range(64))
    assert [i for i, r in enumerate(results) if isinstance(r, Refused)] == [5, 40]


async def test_an_answer_complete_before_it_is_awaited_is_delivered():
    done: Future[str] = Future()
    done.set_result("charged")
    assert await durable(done) == "charged"


async def test_a_cancelled_caller_stops_waiting_and_the_command_is_not_cancelled():
    command: Future[int] = Future()
    other: Future[int] = Future()
    cut_off = asyncio.ensure_future(durable(command))
    waiting = asyncio.ensure_future(durable(other))
    await asyncio.sleep(0)
    cut_off.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cut_off
    assert not command.cancelled()  # the writer still decides it, and whoever cleans up reads it
    complete_on_a_thread([command, other]).join()
    assert await waiting == 1
    assert command.result() == 0


async def test_no_answer_is_lost_when_answers_arrive_while_others_are_handed_over():
    """Bursts of answers from a thread that yields between them, so that the loop takes the list while
    the thread appends: every caller is answered (a lost wake-up would leave some waiting for ever)."""
    futures: list[Future[int]] = [Future() for _ in range(5000)]
    waiting = [asyncio.ensure_future(durable(f)) for f in futures]
    await asyncio.sleep(0)

    def bursts() -> None:
        rng = random.Random(7)
        at = 0
        while at < len(futures):
            size = rng.randint(1, 40)
            for i in range(at, min(at + size, len(futures))):
                futures[i].set_result(i)
            at += size
            time.sleep(rng.choice((0, 0, 0.0001)))

    thread = threading.Thread(target=bursts)
    thread.start()
    results = await asyncio.wait_for(asyncio.gather(*waiting), timeout=30)
    thread.join()
    assert results == list(range(5000))
