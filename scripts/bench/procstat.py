"""CPU time and memory of a server and every process under it, read from /proc (Linux).

A server is counted with all its descendants (uvicorn's worker processes under ``--workers``) and
all their threads (the ledger writer and projector threads run inside the gateway process): the
kernel's per-process ``utime + stime`` includes every thread, exited ones too. Resolution is one
clock tick (10 ms), which is why runs last seconds, not milliseconds.
"""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int, thread: int | None = None) -> list[str] | None:
    """The fields of a process's ``stat`` after its command name, or of one of its threads' (a
    process's main thread has the process's id)."""
    path = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    try:
        text = Path(path).read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rsplit(")", 1)[1].split()  # the command name may contain spaces and parentheses


def process_tree(pid: int) -> list[int]:
    """``pid`` and its live descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, ()))
    return tree


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time the processes have used since they started, in seconds."""
    total = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return total / TICK


def main_thread_cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of each process's main thread, in seconds: a server's event loop,
    without the threads beside it (Tollgate's ledger writer, projector, record writer). What one
    loop spends a request bounds what one process can serve, whatever its other threads do."""
    total = 0
    for pid in pids:
        fields = _stat_fields(pid, thread=pid)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])
    return total / TICK


def _status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def peak_rss_mb(pids: list[int]) -> dict[int, float]:
    """Each process's peak resident set (VmHWM) in MB."""
    return {pid: _status_kb(pid, "VmHWM") / 1024 for pid in pids}


def rss_mb(pids: list[int]) -> dict[int, float]:
    """Each process's resident set now (VmRSS) in MB."""
    return {pid: _status_kb(pid, "VmRSS") / 1024 for pid in pids}
