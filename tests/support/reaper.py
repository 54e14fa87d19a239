"""The reaper: a small process per test process that kills the process groups of the servers the tests
started (gateways, with the workers of ``--workers``) once that test process is gone, however it went.

A test process killed mid-run (``kill -9``, an out-of-memory kill, a CI job's timeout) runs no
fixture teardown and no ``atexit`` handler: its gateways used to go on running, holding their
PostgreSQL connections, until something else killed them (a killed run once left nine for up to 50
minutes, and the next run failed on "too many clients"). The reaper holds the read end of a pipe
whose write end only the test process has; when the test process ends the pipe closes, and the
reaper kills every group still registered. It ignores the signals a terminal or a CI job sends to
the whole group (SIGINT, SIGTERM, SIGHUP), so it outlives the test process it watches.

Run as ``python -I reaper.py``: standard library only, imported by nothing. Protocol, one line per
message on stdin: ``+PGID`` (a group to kill when the pipe closes), ``-PGID`` (stopped already:
forget it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys


def main() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    groups: set[int] = set()
    for line in sys.stdin:
        sign, pgid = line[:1], int(line[1:])
        if sign == "+":
            groups.add(pgid)
        else:
            groups.discard(pgid)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


if __name__ == "__main__":
    main()
