"""A test run killed mid-way leaves no gateway behind (tests/support/children.py).

A killed run once left nine gateways running for up to 50 minutes, holding PostgreSQL connections
until the next run failed on "too many clients". Here a test process starts two gateways the way the
suite does — one from its main thread (the kernel's parent-death signal kills it), one with
``--workers 2`` from another thread (only the reaper kills it and its workers) — and is then killed
with SIGKILL, which runs no teardown: every one of those processes must be gone within seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

INNER_TEST = textwrap.dedent("""
    import json
    import os
    import threading
    import time
    from pathlib import Path

    from tests.support.gateway import Gateway, write_config

    UPSTREAM = "http://127.0.0.1:9/v1"  # never called: the gateways only start


    def _children(pid):
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError):
                    continue
                if parent == pid:
                    found.append(int(entry.name))
        return found


    def test_started_gateways_then_waits_to_be_killed(tmp_path):
        gateway = Gateway(write_config(tmp_path, UPSTREAM)).start()
        started = {}

        def start_with_workers():
            directory = tmp_path / "workers"
            directory.mkdir()
            config = write_config(directory, UPSTREAM, redis=True)
            started["gateway"] = Gateway(config, serve_args=("--workers", "2")).start()

        thread = threading.Thread(target=start_with_workers)
        thread.start()
        thread.join()
        workers = started["gateway"]
        deadline = time.monotonic() + 30
        while True:
            children = _children(workers.process.pid)
            if sum(b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in children) == 2:
                break
            assert time.monotonic() < deadline, "no workers"
            time.sleep(0.1)
        pids = [gateway.process.pid, workers.process.pid, *children]
        Path(os.environ["PIDS_FILE"]).write_text(json.dumps(pids))
        time.sleep(300)
""")


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that still runs (a zombie, killed and not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_gateways_die_with_the_test_process_that_started_them_even_when_it_is_killed(tmp_path):
    (tmp_path / "test_inner.py").write_text(INNER_TEST)
    pids_file = tmp_path / "pids.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PIDS_FILE": str(pids_file), "TOLLGATE_TEST_BACKEND": "sqlite"}
    inner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:asyncio",
            "--rootdir",
            str(tmp_path),
            "test_inner.py",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 200
        while not pids_file.exists() or not pids_file.read_text():
            assert inner.poll() is None, inner.communicate()[0]
            assert time.monotonic() < deadline, "the inner test run started no gateways within 200 s"
            time.sleep(0.1)
        pids = json.loads(pids_file.read_text())
        assert len(pids) >= 4, pids
        assert all(_running(pid) for pid in pids), pids
    finally:
        inner.send_signal(signal.SIGKILL)
        inner.communicate()  # waits for it, and closes its pipe
    deadline = time.monotonic() + 10
    while survivors := [pid for pid in pids if _running(pid)]:
        if time.monotonic() > deadline:
            for pid in survivors:  # not left for the next run either
                os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"still running 10 s after their test process was killed: {survivors}")
        time.sleep(0.1)
