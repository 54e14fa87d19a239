"""``ledger verify`` for the admin API (``GET /admin/ledger/verify``): one run at a time on the
ledger, each in a process of its own.

A verify replays the whole ledger: seconds to minutes of Python, growing with the history. Run in a
thread of the gateway, it took the interpreter lock from the request path (four auditors asking at
once took chat p50 from 12.8 to 44 ms), and four asking at once ran four replays. So:

- a run is a child process (``python -m app.ledger.verify_child``), which has an interpreter of its
  own: the gateway only waits on a pipe. The database URL, password included, goes to it on its
  standard input, never on its command line;
- one run at a time in a gateway process: a caller that asks while this process's run is under way
  waits for that run and gets its report (with when it started and finished), never a second replay;
- one run at a time on the ledger: the child replays only while it holds the ledger's verify lock
  (``app/store/verify_lock.py``: an advisory lock on PostgreSQL, a ``flock`` beside a SQLite file).
  A run asked of another ``--workers`` process, or of another gateway host on the same database,
  waits for the one under way; then it takes the report of the last run if that one began after it
  was asked (each run records itself where every process reads it), else it replays. The instants a
  report gives are those of its replay, after any wait, so runs' intervals never overlap.

When the gateway stops, a run under way is stopped with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from app.ledger.refusals import VerifyUnavailable

log = logging.getLogger("tollgate.ledger")

#: The child's module, run with this interpreter.
CHILD = "app.ledger.verify_child"


@dataclass(frozen=True)
class VerifyRun:
    """One run's report (``projections.audit.VerifyReport``'s fields) and when it ran."""

    report: dict[str, Any]
    started_at: datetime
    finished_at: datetime


class VerifyRuns:
    def __init__(self, database_url: str, base_dir: Path) -> None:
        self._database_url = database_url
        self._base_dir = base_dir
        self._running: asyncio.Task[VerifyRun] | None = None
        self.runs = 0  # how many were started (callers that shared a run share its count)

    async def result(self) -> VerifyRun:
        """The report of the run under way, or of one started now; a caller that goes away leaves
        the run to those still waiting (and to the next caller)."""
        if self._running is None or self._running.done():
            self._running = asyncio.get_running_loop().create_task(self._run())
            self.runs += 1
        return await asyncio.shield(self._running)

    async def _run(self) -> VerifyRun:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            CHILD,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            order = json.dumps({"database_url": self._database_url, "base_dir": str(self._base_dir)}).encode()
            out, err = await child.communicate(order)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            await child.wait()
            raise
        try:
            answer = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        except ValueError:
            answer = {}
        if "report" not in answer:
            why = answer.get("error") or err.decode(errors="replace").strip().splitlines()[-1:] or ["no report"]
            raise VerifyUnavailable(why if isinstance(why, str) else why[0])
        started, finished = (datetime.fromisoformat(answer[at]) for at in ("started_at", "finished_at"))
        if answer["shared"]:
            log.info("ledger verify: took run %d's report (another gateway process ran it)", answer["run"])
        else:
            log.info(
                "ledger verify run %d: replayed from %s to %s",
                answer["run"],
                answer["started_at"],
                answer["finished_at"],
            )
        return VerifyRun(answer["report"], started, finished)

    async def aclose(self) -> None:
        """Stop a run under way (the gateway is stopping)."""
        if self._running is not None and not self._running.done():
            self._running.cancel()
            with contextlib.suppress(BaseException):
                await self._running
