"""The process one ``GET /admin/ledger/verify`` run happens in (``app/ledger/verify_runs.py``).

It reads ``{"database_url", "base_dir"}`` from its standard input, catches the audit history up,
replays and checks the ledger as ``tollgate ledger verify`` does, and writes ``{"report": {...},
"started_at", "finished_at"}`` (or ``{"error": "..."}``) as one JSON line to its standard output. It
runs at a lower CPU priority than the gateway, and only while it holds the ledger's verify lock
(``app/store/verify_lock.py``): a run of another gateway process on the same database is waited for,
and the instants it reports are those of its own replay, after the wait.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

#: How much lower than the gateway's the run's CPU priority is: an audit is never urgent, and where the
#: cores are few the request path gets them first.
NICENESS = 10


def main() -> int:
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    order = json.loads(sys.stdin.read())
    try:
        from app.store.database import Database
        from app.store.event_store import open_ledger_store
        from app.store.verify_lock import one_verify_at_a_time
        from projections.audit import verify_caught_up

        base_dir = Path(order["base_dir"])
        with one_verify_at_a_time(Database.from_url(order["database_url"], base_dir)):
            started = datetime.now(UTC)
            store = open_ledger_store(order["database_url"], base_dir, pool_size=2)
            try:
                report = verify_caught_up(store)
            finally:
                store.close()
            finished = datetime.now(UTC)
    except Exception as exc:  # noqa: BLE001 - whatever stopped the run is what the caller is told
        sys.stdout.write(json.dumps({"error": f"{type(exc).__name__}: {str(exc).strip()}"[:500]}) + "\n")
        return 1
    answer = {"report": {**dataclasses.asdict(report), "ok": report.ok}}
    sys.stdout.write(json.dumps({**answer, "started_at": started.isoformat(), "finished_at": finished.isoformat()}))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
