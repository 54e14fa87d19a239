"""The ``tollgate`` command, each run in a process of its own, forked from one that has already
imported it.

The end-to-end suites run the operator's commands (``team show``, ``ledger export``, ``ledger
verify``...) about 550 times per backend. A fresh ``tollgate`` process spends most of its 0.35 s of
CPU starting Python and importing the application: with both halves of ``make test`` sharing two
cores, that was about a third of all the CPU the suites used. Here a fork server
(``python -m tests.support.cli_fork``, started once per test session) imports the CLI once; each
command is a child forked from it — a process of its own, with the arguments, environment, working
directory, stdout, stderr and exit status a ``tollgate`` process would have, running the same
``app.cli.main.main`` the console script runs, and exiting as the interpreter would (non-daemon
threads joined, ``atexit`` handlers run, output flushed). What it does not exercise is the console
script's two lines and Python's start: tests/e2e/test_cli.py runs the installed command for that.

The protocol, one JSON line per command on the server's stdin and one line per answer on its
stdout: the server forks a watcher for each command, which forks the command, waits for it (killing
it after its timeout) and writes ``{"id": ..., "status": ...}`` back.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: What the commands import, on either backend: imported once, by the server, before it forks.
PRELOADED = (
    "app.cli.main",
    "app.cli.progress",
    "app.cli.support",
    "app.paging",
    "app.ledger.queries",
    "app.ledger.service",
    "app.ledger.writer",
    "projections.audit",
    "app.store.event_store",
    "projections.history",
    "app.store.postgres_store",
    "app.store.sqlite_store",
)

# -- the server (a process of its own) ------------------------------------------------------------


def _exit_status(exc: SystemExit) -> int:
    """What the interpreter makes of a SystemExit that reaches the top."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _run_command(request: dict[str, Any]) -> int:
    """In the forked child: ``tollgate ARGS``, from the console script's call to the interpreter's exit."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY),
        (2, request["stderr"], os.O_WRONLY),
    ):
        target = os.open(path, flags)
        os.dup2(target, fd)
        os.close(target)
    sys.argv = ["tollgate", *request["args"]]
    try:
        from app.cli.main import main

        sys.exit(main(request["args"]))
    except SystemExit as exc:
        status = _exit_status(exc)
    except BaseException:  # noqa: BLE001 - an uncaught exception ends the process as the interpreter ends it
        traceback.print_exc()
        status = 1
    threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter does: non-daemon threads joined
    atexit._run_exitfuncs()  # what the interpreter runs at exit, which os._exit skips
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return status


def _watch(request: dict[str, Any]) -> None:
    """In the watcher: fork the command, wait for it (killing it after its timeout), report its status."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    child = os.fork()
    if child == 0:
        os._exit(_run_command(request))
    timed_out = []

    def kill(signum: int, frame: object) -> None:
        timed_out.append(True)
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)

    signal.signal(signal.SIGALRM, kill)
    signal.setitimer(signal.ITIMER_REAL, request["timeout"])
    _, wait_status = os.waitpid(child, 0)
    signal.setitimer(signal.ITIMER_REAL, 0)
    status: int | str = "timeout" if timed_out else os.waitstatus_to_exitcode(wait_status)
    os.write(1, (json.dumps({"id": request["id"], "status": status}) + "\n").encode())


def serve() -> None:
    """Read commands from stdin until it closes; fork a watcher for each."""
    for module in PRELOADED:
        importlib.import_module(module)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the test run, which closes stdin
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # watchers are reaped as they end
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if os.fork() == 0:
            try:
                _watch(request)
            finally:
                os._exit(0)


# -- the client (in the test process) -------------------------------------------------------------


class _Server:
    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.cli_fork"], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._statuses: dict[int, int | str] = {}
        threading.Thread(target=self._read, name="tollgate-cli-answers", daemon=True).start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            answer = json.loads(line)
            with self._done:
                self._statuses[answer["id"]] = answer["status"]
                self._done.notify_all()
        with self._done:  # the server is gone: nobody waits forever
            self._done.notify_all()

    def run(self, args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        command = ["tollgate", *args]
        with tempfile.TemporaryDirectory(prefix="tollgate-cli-") as directory:
            stdout, stderr = Path(directory, "stdout"), Path(directory, "stderr")
            stdout.touch()
            stderr.touch()
            with self._done:
                request_id = next(self._ids)
                request = {
                    "id": request_id,
                    "args": args,
                    "env": env,
                    "cwd": str(Path.cwd()),
                    "timeout": timeout,
                    "stdout": str(stdout),
                    "stderr": str(stderr),
                }
                assert self._process.stdin is not None
                self._process.stdin.write((json.dumps(request) + "\n").encode())
                self._process.stdin.flush()
                while request_id not in self._statuses:
                    if self._process.poll() is not None:
                        raise RuntimeError(f"the tollgate fork server exited ({self._process.returncode})")
                    self._done.wait(timeout=1)
                status = self._statuses.pop(request_id)
            out, err = stdout.read_text(), stderr.read_text()
        if status == "timeout":
            raise subprocess.TimeoutExpired(command, timeout, out, err)
        assert isinstance(status, int)
        return subprocess.CompletedProcess(command, status, out, err)

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=30)


_server: _Server | None = None
_starting = threading.Lock()


def run_tollgate(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(["tollgate", *args], capture_output=True, text=True, env=env, timeout=timeout)``,
    in a child of the fork server."""
    global _server  # one server per test process, started on first use
    with _starting:
        if _server is None:
            _server = _Server()
            atexit.register(_server.close)
    return _server.run(list(args), env, timeout)


if __name__ == "__main__":
    serve()
