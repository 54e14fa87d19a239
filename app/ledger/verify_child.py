"""The process one ``GET /admin/ledger/verify`` run happens in (``app/ledger/verify_runs.py``).

It reads ``{"database_url", "base_dir"}`` from its standard input, catches the audit history up,
replays and checks the ledger as ``tollgate ledger verify`` does, and writes ``{"run", "position",
"started_at", "finished_at", "report": {...}}`` (or ``{"error": "..."}``) as one JSON line to its
standard output. It runs at a lower CPU priority than the gateway, and only while it holds the
ledger's verify lock (``app/store/verify_lock.py``): a run of another gateway process on the same
database is waited for, and then its report is taken if that run began after this one was asked for,
else the ledger is replayed. The instants reported are those of the replay, after any wait.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from app.store.verify_lock import RecordedRun, last_run, one_verify_at_a_time, record_run

#: How much lower than the gateway's the run's CPU priority is: an audit is never urgent, and where the
#: cores are few the request path gets them first.
NICENESS = 10


def main() -> int:
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    order = json.loads(sys.stdin.read())
    try:
        run, shared = _verified(order["database_url"], Path(order["base_dir"]))
    except Exception as exc:  # noqa: BLE001 - whatever stopped the run is what the caller is told
        sys.stdout.write(json.dumps({"error": f"{type(exc).__name__}: {str(exc).strip()}"[:500]}) + "\n")
        return 1
    sys.stdout.write(json.dumps({**dataclasses.asdict(run), "shared": shared}) + "\n")
    return 0


def _verified(database_url: str, base_dir: Path) -> tuple[RecordedRun, bool]:
    """The report of a run begun after this one was asked for: another process's, if one ran while this
    one waited for the lock (then True: shared), else this one's own replay (recorded for the others)."""
    from app.store.database import Database
    from app.store.event_store import open_ledger_store
    from projections.audit import verify_caught_up

    database = Database.from_url(database_url, base_dir)
    store = open_ledger_store(database_url, base_dir, pool_size=2)  # the schema current, before anything reads it
    try:
        before = last_run(database)
        seen = before.run if before is not None else 0
        with one_verify_at_a_time(database):
            latest = last_run(database)
            if latest is not None and latest.run >= seen + 2:
                return latest, True  # begun after the one under way when this caller came had ended: shared
            started = datetime.now(UTC).isoformat()
            position = store.recorder.max_notification_id() or 0
            report = verify_caught_up(store)
            run = RecordedRun(
                (latest.run if latest is not None else 0) + 1,
                position,
                started,
                datetime.now(UTC).isoformat(),
                {**dataclasses.asdict(report), "ok": report.ok},
            )
            record_run(database, run)
            return run, False
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
