"""The ledger writer's answers, delivered to the event loop once per batch.

The writer thread completes a ``concurrent.futures.Future`` for every command it decided. Awaited
with ``asyncio.wrap_future`` (and ``asyncio.shield``, so that a cancelled caller never cancels its
command), each completion was one ``call_soon_threadsafe`` — a wake-up of the loop — and three
futures and five callbacks a request. Here a completion only appends to its loop's list of
arrivals, and the first arrival since the loop last looked schedules the one call that hands them
all over: a batch of 64 charges wakes the loop once, and a caller waits on one future of its own.

A caller that is cancelled stops waiting (its future is cancelled) and the command's own future is
untouched, as ``asyncio.shield`` had it: the command is applied all the same, its events are facts
once decided, and whoever needs its outcome after a cancellation (the billing's clean-up) reads
the command's future.

No lock is needed between the writer thread and the loop: the writer appends, then sets the flag
if it was clear; the loop clears the flag, then takes the list. An arrival appended before the loop
takes the list is in it; one appended after sees the flag clear and schedules another call.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar

R = TypeVar("R")


class _Arrivals:
    """The answers completed for one event loop since it last took them."""

    __slots__ = ("_loop", "_scheduled", "_waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiting: list[tuple[asyncio.Future[Any], Future[Any]]] = []
        self._scheduled = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def arrived(self, waiter: asyncio.Future[Any], answer: Future[Any]) -> None:
        """``answer`` is complete (on the writer thread, or any): hand it to ``waiter`` on the loop."""
        self._waiting.append((waiter, answer))
        if not self._scheduled:
            self._scheduled = True
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is left to wait
                self._loop.call_soon_threadsafe(self._hand_over)

    def _hand_over(self) -> None:
        """On the loop: every answer that arrived, to its waiter (one that stopped waiting is skipped)."""
        self._scheduled = False
        arrived, self._waiting = self._waiting, []
        for waiter, answer in arrived:
            if waiter.done():
                continue
            if answer.cancelled():
                waiter.cancel()
                continue
            error = answer.exception()
            if error is not None:
                waiter.set_exception(error)
            else:
                waiter.set_result(answer.result())


_this_thread = threading.local()


def _arrivals(loop: asyncio.AbstractEventLoop) -> _Arrivals:
    """The running loop's arrivals (a loop runs on one thread: kept per thread)."""
    arrivals: _Arrivals | None = getattr(_this_thread, "arrivals", None)
    if arrivals is None or arrivals.loop is not loop:
        arrivals = _this_thread.arrivals = _Arrivals(loop)
    return arrivals


async def durable(answer: Future[R]) -> R:
    """A ledger command's answer, awaited on the event loop (see the module's docstring): its value
    once its events are durable, or the refusal it raised. A caller that is cancelled stops waiting;
    the command is applied all the same."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[R] = loop.create_future()
    answer.add_done_callback(partial(_arrivals(loop).arrived, waiter))
    return await waiter
