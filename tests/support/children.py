"""Servers the tests start as processes (``tollgate serve``, ``tollgate demo``, a fake upstream) die
with the test process that started them, however it ends: a killed or failed run leaves none behind.

Two mechanisms, because each covers what the other cannot:

- the kernel's parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``, set in the child between
  fork and exec): the server is killed the moment the test process dies, even by ``kill -9``. The
  kernel ties it to the *thread* that forked, so it is set only for servers started from the main
  thread (every fixture and test body); a server started from a worker thread would die with it.
- each server leads a process group of its own, registered with the test process's reaper
  (tests/support/reaper.py), which kills every group still registered when the test process is
  gone: the workers of ``serve --workers`` and servers started from other threads included. Their
  own group also keeps a terminal's Ctrl-C (sent to the foreground group) from reaching them before
  the test process has stopped them as it stops them always (SIGTERM, then a wait).

Gateways forked by tests/support/cli_fork.py's server, not this process's children, have both too:
a chain of parent-death signals (the server dies with the test process, each of its watchers with
the server, each gateway with its watcher) and their group registered with the reaper (``watch_server``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.support.cli_fork import ForkedServer

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
_reaper: subprocess.Popen[str] | None = None
_reaper_lock = threading.Lock()


def _die_with(parent: int) -> Any:
    """The child's last step before exec: ask the kernel for SIGKILL when ``parent`` (its thread) dies,
    and die now if it already has (the signal is only sent for a death after the request)."""

    def preexec() -> None:
        if _libc is not None:
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def _send_to_reaper(line: str) -> None:
    global _reaper  # one reaper per test process, started with its first server
    with _reaper_lock:
        if _reaper is None or _reaper.poll() is not None:
            _reaper = subprocess.Popen(
                [sys.executable, "-I", str(Path(__file__).with_name("reaper.py"))],
                stdin=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        assert _reaper.stdin is not None
        _reaper.stdin.write(line + "\n")
        _reaper.stdin.flush()


def start_server(args: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(args, **popen)`` for a long-lived server: in a process group of its own,
    killed with the test process (see the module's docstring). Stop it with ``end_server``."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    process = subprocess.Popen(
        args,
        start_new_session=True,
        preexec_fn=_die_with(os.getpid()) if in_main_thread else None,  # noqa: PLW1509 - see _die_with
        **popen,
    )
    _send_to_reaper(f"+{process.pid}")
    return process


def watch_server(pid: int) -> None:
    """Have the reaper kill the process group ``pid`` leads if this process dies first (a server that
    is not this process's child: tests/support/cli_fork.py forks the gateways)."""
    _send_to_reaper(f"+{pid}")


def end_server(process: subprocess.Popen[Any] | ForkedServer, *, timeout: float = 15) -> None:
    """Stop a server as an operator does (SIGTERM, waiting up to ``timeout`` s, then SIGKILL) and
    kill whatever is left of its process group (workers whose parent was killed)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    forget_server(process)


def forget_server(process: subprocess.Popen[Any] | ForkedServer) -> None:
    """A server that has exited: kill what is left of its group, take it off the reaper's list, and
    close the pipes it was given (left to the collector, each is a ResourceWarning: an error here)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    _send_to_reaper(f"-{process.pid}")
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
