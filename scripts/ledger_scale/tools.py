"""The operator's tools on the built ledger, each timed as the operator runs it (a ``tollgate``
process, Python's start included): ``ledger verify``, ``ledger rebuild`` and ``ledger export``,
with each process's peak resident set: its ``VmHWM``, sampled from ``/proc`` while it runs (its
``ru_maxrss`` would not do: Linux carries the forking parent's resident set, this benchmark's
hundred-odd megabytes, over into a child's ``ru_maxrss`` through ``exec``).

Their output is read as it comes (the export's rows are counted, never kept), so the export is
measured writing to a pipe, as into ``> file``.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from scripts.bench import servers
from scripts.ledger_scale.ledger import Ledger


def run_tool(ledger: Ledger, workdir: Path, *args: str, timeout: float = 7200) -> dict[str, Any]:
    """``tollgate ARGS --config …``: seconds, exit code, the lines it wrote, its peak RSS (MB)."""
    errors = workdir / f"{ledger.backend}-{'-'.join(a.strip('-') for a in args[1:])}.err"
    started = time.perf_counter()
    with errors.open("wb") as err:
        process = subprocess.Popen(
            [*servers.tollgate_command(), *args, "--config", str(ledger.config)],
            stdout=subprocess.PIPE,
            stderr=err,
            env=servers.child_env(),
        )
    assert process.stdout is not None
    peak = _PeakWatcher(process.pid)
    lines, tail = 0, b""
    while chunk := process.stdout.read(1 << 16):
        lines += chunk.count(b"\n")
        tail = (tail + chunk)[-4000:]
        if time.perf_counter() - started > timeout:
            process.kill()
    process.stdout.close()
    peak.stop()
    _, status, _ = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, for its rusage: Popen must not wait
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise RuntimeError(
            f"tollgate {' '.join(args)} failed ({process.returncode}): "
            f"{errors.read_text()[-2000:]}{tail.decode(errors='replace')[-1000:]}"
        )
    return {
        "seconds": seconds,
        "lines": lines,
        "peak_rss_mb": peak.kib / 1024,
        "output_tail": tail.decode(errors="replace")[-500:],
    }


def operator_tools(ledger: Ledger, workdir: Path, big_team: str) -> dict[str, Any]:
    """verify (events/s), rebuild (events/s), and the export of the big team (rows/s)."""
    events = _total_events(ledger)
    verify = run_tool(ledger, workdir, "ledger", "verify")
    rebuild = run_tool(ledger, workdir, "ledger", "rebuild")
    rebuild["events"] = events
    rebuild["events_per_s"] = events / rebuild["seconds"]
    verify["events"] = events
    verify["events_per_s"] = events / verify["seconds"]
    return {"verify": verify, "rebuild": rebuild, "export": export(ledger, workdir, big_team)}


def export(ledger: Ledger, workdir: Path, team: str) -> dict[str, Any]:
    """``ledger export --team TEAM`` (CSV): its rows, and rows/s."""
    result = run_tool(ledger, workdir, "ledger", "export", "--team", team)
    result["rows"] = result["lines"] - 1  # a header line, then a line per entry
    result["rows_per_s"] = result["rows"] / result["seconds"]
    return result


def _total_events(ledger: Ledger) -> int:
    sql = ledger.sql()
    try:
        table = ledger.database.events_table
        column = "rowid" if ledger.backend == "sqlite" else "notification_id"
        return int(sql.query(f"SELECT COALESCE(MAX({column}), 0) AS n FROM {table}")[0]["n"])
    finally:
        sql.close()


class _PeakWatcher:
    """Samples a process's ``VmHWM`` (its resident set's high-water mark) every 20 ms until told to
    stop, which is after the process closed its output and before it is reaped."""

    def __init__(self, pid: int) -> None:
        self.kib = 0
        self._status = Path(f"/proc/{pid}/status")
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while True:
            try:
                for line in self._status.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        self.kib = max(self.kib, int(line.split()[1]))
            except (OSError, ValueError, IndexError):  # exiting: its last sample stands
                return
            if self._done.wait(0.02):
                return

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
