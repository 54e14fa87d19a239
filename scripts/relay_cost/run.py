"""The measurement and its report: each case's CPU per request over rounds, the cases alternating, and
the command line (``python -m scripts.relay_cost``; its help is the package's docstring)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NamedTuple

import scripts.relay_cost
from app.observability import metrics
from scripts.relay_cost.canned import CASES
from scripts.relay_cost.driver import Driver, setup
from scripts.relay_cost.relay_only import relay_once


def _context_switches(status: Path) -> int:
    """Voluntary and involuntary context switches of a thread (``/proc/…/status``; 0 where there is
    none): every time the event loop's thread sleeps and is woken, or waits for the interpreter lock."""
    try:
        text = status.read_text()
    except OSError:
        return 0
    return sum(int(line.split()[1]) for line in text.splitlines() if "ctxt_switches:" in line)


def _thread_cpu() -> dict[str, float]:
    """CPU seconds each of the process's threads has used so far, by thread name (threads of one name
    summed; a thread that ends between two readings is missed, which none of the gateway's do)."""
    used: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        try:
            seconds = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except OSError:  # it ended meanwhile
            continue
        name = "event loop" if thread is threading.main_thread() else thread.name
        used[name] = used.get(name, 0.0) + seconds
    return used


def _writer_batches() -> float:
    """Batches the ledger writer has committed so far in this process (its batch-size histogram's count)."""
    return sum(s.value for m in metrics.BATCH_SIZE.collect() for s in m.samples if s.name.endswith("_count"))


class Measured(NamedTuple):
    """One round of one case, per request: the process's CPU seconds, the event loop thread's, the loop
    thread's context switches, the writer's committed batches, and each thread's CPU seconds by name."""

    process: float
    loop: float
    switches: float
    batches: float
    threads: dict[str, float]


async def measure(driver: Driver, case: str, requests: int, concurrency: int, part: str) -> Measured:
    """CPU seconds per request of ``requests`` requests of ``case``, ``concurrency`` at a time: the
    process's, and the event loop's thread's alone; and the loop thread's context switches per request."""
    driver.case = CASES[case]
    once = driver.request if part == "request" else partial(relay_once, driver)
    left = requests

    async def loop() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            status = await once()
            if status != 200:
                raise RuntimeError(f"{case}: status {status}")

    await asyncio.gather(*(loop() for _ in range(2)))  # warm
    left = requests
    status = Path("/proc/thread-self/status")
    threads_before, batches_before = _thread_cpu(), _writer_batches()
    start, loop_start, switches = time.process_time(), time.thread_time(), _context_switches(status)
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    loop_cpu, switched = time.thread_time() - loop_start, _context_switches(status) - switches
    batches = _writer_batches() - batches_before  # every request's charge was committed: the loop waited for it
    await asyncio.sleep(0.3)  # the writer's last commits
    threads = {name: (cpu - threads_before.get(name, 0.0)) / requests for name, cpu in _thread_cpu().items()}
    process = (time.process_time() - start) / requests
    return Measured(process, loop_cpu / requests, switched / requests, batches / requests, threads)


async def run(args: argparse.Namespace) -> None:
    cases = args.cases.split(",")
    with tempfile.TemporaryDirectory(prefix="relay-cost-") as tmp:
        config, key = setup(Path(tmp))
        driver = Driver(config, key)
        await driver.start()
        gc.collect()
        gc.freeze()  # what start-up built is never collected: each round's collections walk what requests make
        try:
            results: dict[str, list[Measured]] = {case: [] for case in cases}
            for _ in range(args.rounds):
                for case in cases:
                    results[case].append(await measure(driver, case, args.requests, args.concurrency, args.part))
        finally:
            await driver.stop()
    print(
        f"CPU per request ({args.part}), in process, concurrency {args.concurrency}, {args.requests} requests × "
        f"{args.rounds} rounds: the median and the least of the rounds (the least is the one the machine's "
        f"other work disturbed least), each against {cases[0]}'s; the process's, and the event loop's thread's"
    )
    figures: tuple[tuple[str, Callable[[Measured], float]], ...] = (
        ("process", lambda r: r.process),
        ("event loop", lambda r: r.loop),
    )
    for name, of in figures:
        base = statistics.median(of(r) for r in results[cases[0]])
        least = min(of(r) for r in results[cases[0]])
        for case in cases:
            values = [of(r) for r in results[case]]
            median = statistics.median(values)
            print(
                f"  {name:10} {case:22} median {median * 1e3:6.3f} ms ({median / base:4.2f}×)   "
                f"least {min(values) * 1e3:6.3f} ms ({min(values) / least:4.2f}×)"
            )
    print(
        "the event loop's thread's context switches (it slept and was woken, or waited for the lock) per "
        "request, and per batch the ledger writer committed:"
    )
    for case in cases:
        switches = statistics.median(r.switches for r in results[case])
        batches = statistics.median(r.batches for r in results[case])
        per_batch = f"{switches / batches:6.2f} a batch ({1 / batches:5.1f} requests a batch)" if batches else ""
        print(f"  {case:22} median {switches:6.2f}   {per_batch}")
    print(
        "CPU per request by thread, medians (the event loop's here includes the 0.3 s after each round; "
        "what the threads other than the loop use is what a ledger process of its own would take off it):"
    )
    for case in cases:
        names = sorted({n for r in results[case] for n in r.threads}, key=lambda n: -results[case][0].threads.get(n, 0))
        shares = {n: statistics.median(r.threads.get(n, 0.0) for r in results[case]) for n in names}
        total = sum(shares.values()) or 1.0
        listed = ", ".join(f"{n} {v * 1e3:.3f} ms ({v / total:.0%})" for n, v in shares.items() if v * 1e3 >= 0.001)
        print(f"  {case:22} {listed}")


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.relay_cost",
        description=scripts.relay_cost.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--cases", default="chat,chat_stream,chat_stream_apart")
    parser.add_argument(
        "--part",
        choices=("request", "relay"),
        default="request",
        help="the whole request (default), or the relay alone: no auth, no prompt count, no "
        "ledger (the answer's cost is fixed), so what changes between runs is the relay's",
    )
    asyncio.run(run(parser.parse_args()))
