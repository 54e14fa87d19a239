"""A cold load, measured in a process of its own: how long ``LedgerStore.load_team`` takes on a
process that has never seen the team, and how much memory it takes.

The store is opened and its connection used once first (a gateway has done both long before its
first request); then the peak resident set is reset (``/proc/self/clear_refs``), the team loaded,
and the time, the growth of the resident set (VmRSS) and of its peak during the load (VmHWM) are
printed as JSON. ``--full-replay`` loads the team from its events alone, ignoring its snapshots (a
replay from version 0, a page at a time, as ``load_team`` does without a snapshot): the baseline.
``--version V`` loads the team as it was at version V (from the latest snapshot before it).

    python -m scripts.ledger_scale.coldload --database-url URL --base-dir DIR --team UUID [--full-replay]
                                            [--version V]
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast
from uuid import UUID

from app.store.event_store import open_ledger_store
from domain.ledger import TeamLedger


def _status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    """Reset VmHWM to the current resident set (Linux 4.0+); False if the kernel refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def measure(
    database_url: str, base_dir: Path, team: UUID, full_replay: bool, version: int | None = None
) -> dict[str, Any]:
    store = open_ledger_store(database_url, base_dir, pool_size=2)
    try:
        store.recorder.max_notification_id()  # the connection is open and used, as a gateway's is
        gc.collect()
        peak_reset = _reset_peak()
        before = _status_kb("VmRSS")
        started = time.perf_counter()
        if full_replay:
            loaded: TeamLedger | None = None
            for event in store.events_after(team, 0):
                loaded = cast(TeamLedger, event.mutate(loaded))
            snapshot_version = 0
        else:
            loaded, snapshot_version = store.load_team(team, version)
        seconds = time.perf_counter() - started
        after, peak = _status_kb("VmRSS"), _status_kb("VmHWM")
    finally:
        store.close()
    return {
        "seconds": seconds,
        "ms": seconds * 1e3,
        "version": loaded.version if loaded else 0,
        "snapshot_version": snapshot_version,
        "rss_before_mb": before / 1024,
        "rss_growth_mb": (after - before) / 1024,
        "peak_growth_mb": (peak - before) / 1024 if peak_reset else None,
    }


def cold_load(
    database_url: str,
    base_dir: Path,
    team: UUID,
    *,
    full_replay: bool = False,
    version: int | None = None,
    timeout: float = 3600,
) -> dict[str, Any]:
    """``measure`` in a fresh Python process."""
    command = [
        sys.executable,
        "-m",
        "scripts.ledger_scale.coldload",
        "--database-url",
        database_url,
        "--base-dir",
        str(base_dir),
        "--team",
        str(team),
        *(["--full-replay"] if full_replay else []),
        *(["--version", str(version)] if version is not None else []),
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, cwd=Path(__file__).resolve().parents[2]
    )
    if result.returncode != 0:
        raise RuntimeError(f"the cold load failed ({result.returncode}): {result.stderr[-2000:]}")
    answer: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one cold load of a team, as JSON")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--base-dir", type=Path, required=True)
    parser.add_argument("--team", type=UUID, required=True)
    parser.add_argument("--full-replay", action="store_true")
    parser.add_argument("--version", type=int, help="load the team as it was at this version")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.database_url, args.base_dir, args.team, args.full_replay, args.version)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
