"""Issue #27, finding 11: ``GET /admin/ledger/verify`` runs one replay at a time across every process
sharing the ledger, and a run that waited takes the report of a run begun after it was asked for
rather than replaying again (``app/store/verify_lock.py``). Here three runs are asked for while the
ledger's verify lock is held, as by a run under way in another gateway process: the first to get the
lock replays (the one it waited for began before it asked), so does the second (the first began
before it asked too), and the third takes the second's report. Each is the real run process, given
the gateway's ledger as a gateway gives it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from app.store.database import Database
from app.store.verify_lock import VERIFY_LOCK, one_verify_at_a_time
from domain.settings import parse_settings
from tests.support.backend import RawDatabase
from tests.support.gateway import Gateway


def _waiting(database: Database, config: Path, pids: set[int]) -> int:
    """How many of these processes are waiting for the ledger's verify lock."""
    if database.kind == "postgresql":
        rows = RawDatabase.of_config(config).execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = %s AND objid = %s",
            (VERIFY_LOCK >> 32, VERIFY_LOCK & 0xFFFFFFFF),
        )
        return len(rows)  # the children's sessions are the only ones that ask for it
    fields = [line.split() for line in Path("/proc/locks").read_text().splitlines()]
    return len([f for f in fields if len(f) > 5 and f[1] == "->" and f[2] == "FLOCK" and int(f[5]) in pids])


def test_a_run_that_waited_takes_the_report_of_a_run_begun_after_it_asked(gateway: Gateway):
    settings = parse_settings(gateway.config.read_text(), str(gateway.config))
    database = Database.from_url(settings.database_url, gateway.config.parent)
    order = json.dumps({"database_url": settings.database_url, "base_dir": str(gateway.config.parent)})
    children: list[subprocess.Popen[str]] = []
    try:
        with one_verify_at_a_time(database):  # a run under way elsewhere
            for _ in range(3):
                child = subprocess.Popen(
                    [sys.executable, "-m", "app.ledger.verify_child"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                assert child.stdin is not None
                child.stdin.write(order)
                child.stdin.close()
                children.append(child)
            deadline = time.monotonic() + 60
            while _waiting(database, gateway.config, {c.pid for c in children}) < 3:
                assert time.monotonic() < deadline, "the three runs never waited for the lock"
                assert all(c.poll() is None for c in children), "a run ended without waiting"
                time.sleep(0.05)
        answers = []
        for child in children:
            assert child.stdout is not None
            assert child.stderr is not None
            out, err = child.stdout.read(), child.stderr.read()  # a line each, and a run's little log
            assert child.wait(timeout=120) == 0, err
            answers.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
            child.wait()
            for stream in (child.stdout, child.stderr):
                if stream is not None:
                    stream.close()
    replays = sorted((a for a in answers if not a["shared"]), key=lambda a: a["run"])
    shared = [a for a in answers if a["shared"]]
    assert (len(replays), len(shared)) == (2, 1), answers
    assert replays[1]["run"] == replays[0]["run"] + 1
    assert replays[1]["started_at"] >= replays[0]["finished_at"]  # one at a time
    assert shared[0] == {**replays[1], "shared": True}  # the second's report, when it ran, what it read
    assert shared[0]["report"]["ok"], shared[0]["report"]["problems"]
    assert shared[0]["position"] > 0  # the ledger's last event when it began
