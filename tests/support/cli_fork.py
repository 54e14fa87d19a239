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

The gateways the tests start (``tollgate serve``, tests/support/gateway.py) come from the same
server: a gateway's start was about 2.3 s of CPU, three quarters of it Python's start, the imports
and the tokenizer's build, and the end-to-end halves start a few hundred. A served process leads a
session of its own (its process group is what the tests and the reaper kill), writes its output to
one log file, and is reported by its pid as soon as it is forked.

The protocol, one JSON line per command on the server's stdin and one line per answer on its
stdout: the server forks a watcher for each command, which forks the command, waits for it (killing
it after its timeout, if it has one) and writes ``{"id": ..., "status": ...}`` back; for a served
process it first writes ``{"id": ..., "pid": ...}``. Each process of the chain is killed by the
kernel when its parent dies (the server with the test process, a watcher with the server, a command
with its watcher), so a killed test run leaves none of them behind.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import importlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from tests.support.children import _die_with

ROOT = Path(__file__).resolve().parents[2]
#: What the commands import, on either backend: imported once, by the server, before it forks.
PRELOADED = (
    "app.cli.main",
    "app.http.serving",
    "app.http.server",
    "app.runtime",
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
    # What a gateway's start imports on its way (a profile of make test's SQLite half found a third of
    # the forked processes' CPU in these): the read-model migrations (alembic, with mako and pygments
    # behind it, and SQLAlchemy), Litestar's pydantic plugin, anyio's and uvloop's event loops, and
    # the Stripe library the payment routes use.
    "app.store.schema",
    "alembic.command",
    "alembic.config",
    "alembic.runtime.migration",
    "alembic.runtime.environment",
    "alembic.script",
    "alembic.op",
    "litestar.plugins.pydantic",
    "anyio._backends._asyncio",
    "uvloop",
    "stripe",
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


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent() -> None:
    """Ask the kernel for SIGKILL when this process's parent dies, and die now if it already has."""
    parent = os.getppid()
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent or parent == 1:
        os._exit(1)


def _run_command(request: dict[str, Any]) -> int:
    """In the forked child: ``tollgate ARGS``, from the console script's call to the interpreter's exit."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    _die_with_parent()
    if request.get("serve"):
        os.setsid()  # a group of its own, as tests/support/children.py gives every server
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # A served process writes its output and its errors to one log, each write at its end.
    out_flags = os.O_WRONLY | os.O_APPEND if request.get("serve") else os.O_WRONLY
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["stdout"], out_flags),
        (2, request["stderr"], out_flags),
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
    _die_with_parent()
    child = os.fork()
    if child == 0:
        os._exit(_run_command(request))
    if request.get("serve"):
        os.write(1, (json.dumps({"id": request["id"], "pid": child}) + "\n").encode())
    timed_out = []

    def kill(signum: int, frame: object) -> None:
        timed_out.append(True)
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)

    signal.signal(signal.SIGALRM, kill)
    if request["timeout"] is not None:
        signal.setitimer(signal.ITIMER_REAL, request["timeout"])
    _, wait_status = os.waitpid(child, 0)
    signal.setitimer(signal.ITIMER_REAL, 0)
    status: int | str = "timeout" if timed_out else os.waitstatus_to_exitcode(wait_status)
    os.write(1, (json.dumps({"id": request["id"], "status": status}) + "\n").encode())


def serve() -> None:
    """Read commands from stdin until it closes; fork a watcher for each."""
    for module in PRELOADED:
        importlib.import_module(module)
    from app.tokens.encoding import o200k

    o200k()  # built once here, not by each gateway
    # What was built so far is kept out of the collector's sight (gc.freeze, as Python's documentation
    # advises before forking): each gateway's full collection at start (``settle_interpreter``) then
    # walks only its own objects, not the imports' again, and no page is written just to be scanned.
    gc.collect()
    gc.freeze()
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
        in_main_thread = threading.current_thread() is threading.main_thread()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.cli_fork"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            preexec_fn=_die_with(os.getpid()) if in_main_thread else None,  # noqa: PLW1509 - see children.py
        )
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)
        self._statuses: dict[int, int | str] = {}
        self._pids: dict[int, int] = {}
        threading.Thread(target=self._read, name="tollgate-cli-answers", daemon=True).start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            answer = json.loads(line)
            with self._done:
                if "pid" in answer:
                    self._pids[answer["id"]] = answer["pid"]
                else:
                    self._statuses[answer["id"]] = answer["status"]
                self._done.notify_all()
        with self._done:  # the server is gone: nobody waits forever
            self._done.notify_all()

    def _send(self, request: dict[str, Any]) -> None:
        """Under ``self._done``: one request to the server."""
        assert self._process.stdin is not None
        self._process.stdin.write((json.dumps(request) + "\n").encode())
        self._process.stdin.flush()

    def spawn(self, args: list[str], env: dict[str, str], log: Path) -> ForkedServer:
        """``tollgate ARGS`` as a long-lived server writing to ``log``; returns once it is forked."""
        with self._done:
            request_id = next(self._ids)
            request = {
                "id": request_id,
                "serve": True,
                "args": args,
                "env": env,
                "cwd": str(Path.cwd()),
                "timeout": None,
                "stdout": str(log),
                "stderr": str(log),
            }
            self._send(request)
            while request_id not in self._pids:
                if self._process.poll() is not None:
                    raise RuntimeError(f"the tollgate fork server exited ({self._process.returncode})")
                self._done.wait(timeout=1)
            return ForkedServer(self, request_id, self._pids.pop(request_id))

    def status(self, request_id: int, timeout: float | None) -> int | None:
        """The exit status of a served process, waiting up to ``timeout`` s for it (None: for ever)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._done:
            while request_id not in self._statuses:
                left = None if deadline is None else deadline - time.monotonic()
                if (left is not None and left <= 0) or self._process.poll() is not None:
                    return None
                self._done.wait(timeout=1 if left is None else min(left, 1))
            status = self._statuses[request_id]
        assert isinstance(status, int)
        return status

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
                self._send(request)
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


class ForkedServer:
    """A served ``tollgate`` process forked by the server: what tests use of ``subprocess.Popen``
    (its pid, ``poll``, ``wait``, the signals, ``returncode``). It is not this process's child, so
    its exit status comes from its watcher, through the server."""

    stdin = stdout = stderr = None  # what tests/support/children.py closes of a Popen

    def __init__(self, server: _Server, request_id: int, pid: int) -> None:
        self._server = server
        self._request_id = request_id
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.status(self._request_id, timeout=0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._server.status(self._request_id, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(["tollgate", "serve"], timeout or 0)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def spawn_tollgate(args: list[str], env: dict[str, str], log: Path) -> ForkedServer:
    """``tollgate ARGS`` as a server (``serve``), forked from the server, its output in ``log``."""
    return _fork_server().spawn(list(args), env, log)


def _fork_server() -> _Server:
    global _server  # one server per test process, started on first use
    with _starting:
        if _server is None:
            _server = _Server()
            atexit.register(_server.close)
    return _server


_server: _Server | None = None
_starting = threading.Lock()


def run_tollgate(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(["tollgate", *args], capture_output=True, text=True, env=env, timeout=timeout)``,
    in a child of the fork server."""
    return _fork_server().run(list(args), env, timeout)


if __name__ == "__main__":
    serve()
