"""The in-process cost tool runs end to end, splits a request's CPU by thread and counts the
writer's batches (tiny sizes; numbers not judged, but the split must account for the process's CPU:
it is what says how much a ledger process of its own would take off the event loop)."""

from __future__ import annotations

import re
import subprocess
import sys

QUICK = ("--concurrency", "8", "--cases", "chat")


def _ms(text: str, pattern: str) -> float:
    found = re.search(pattern, text)
    assert found, f"{pattern!r} not in:\n{text}"
    return float(found.group(1))


def test_each_thread_s_share_adds_up_to_the_process_s_cpu():
    result = subprocess.run(
        [sys.executable, "-m", "scripts.relay_cost", *("--requests", "200", "--rounds", "1"), *QUICK],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    process = _ms(out, r"process\s+chat\s+median\s+([\d.]+) ms")
    line = out.split("CPU per request by thread", 1)[1].splitlines()[1].strip()
    assert line.startswith("chat ")
    shares = re.findall(r"([\w-]+(?: [\w-]+)?) ([\d.]+) ms \(\d+%\)", line.removeprefix("chat"))
    threads = {name: float(ms) for name, ms in shares}
    assert threads["event loop"] > 0
    assert threads["tollgate-ledger-writer"] > 0  # every charge is written on the writer's thread
    assert 0.8 * process <= sum(threads.values()) <= 1.2 * process, (process, threads)
    # every request's charge was committed by the writer, in batches of at most MAX_BATCH (64) commands
    per_batch = _ms(out, r"chat\s+median\s+[\d.]+\s+[\d.]+ a batch \(\s*([\d.]+) requests a batch\)")
    assert 1 <= per_batch <= 64, per_batch
