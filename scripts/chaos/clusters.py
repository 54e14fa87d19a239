"""The suite's own PostgreSQL cluster and Redis server, so that restarting them disturbs nothing else.

The chaos suite restarts its database and its Redis and makes the database refuse connections;
doing that to the machine's servers would break every test and every engineer beside it. So it
``initdb``s a cluster into a temporary folder, with the binaries of the installed PostgreSQL, and
starts it with ``pg_ctl`` on a free loopback port (its socket in the same folder), and runs its own
``redis-server`` on another free port, as a child process. PostgreSQL refuses to run as root:
when the suite runs as root, the cluster belongs to the ``postgres`` user and its commands run as
that user (``runuser``).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

#: The operating-system user that owns the cluster when the suite runs as root.
POSTGRES_USER = "postgres"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def postgres_bindir() -> Path:
    """Where the installed PostgreSQL's ``initdb`` and ``pg_ctl`` are: ``pg_config --bindir``, else
    the newest ``/usr/lib/postgresql/*/bin``, else the folder of ``pg_ctl`` on the PATH."""
    try:
        found = Path(
            subprocess.run(
                ["pg_config", "--bindir"], capture_output=True, text=True, check=True, timeout=10
            ).stdout.strip()
        )
        if (found / "pg_ctl").exists():
            return found
    except (OSError, subprocess.SubprocessError):
        pass
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if versions:
        return versions[-1].parent
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).resolve().parent
    raise RuntimeError("no PostgreSQL binaries found (pg_config --bindir, /usr/lib/postgresql/*/bin, pg_ctl)")


class PostgresCluster:
    """A throwaway PostgreSQL cluster in ``folder``: trust authentication, loopback only, fsync on
    (the suite tests crashes, so the database must be as durable as a real one)."""

    def __init__(self, folder: Path, address: str = "127.0.0.1", prefix: tuple[str, ...] = ()) -> None:
        """``address``: where it listens; ``prefix``: what runs its commands elsewhere (a network
        namespace's ``ip netns exec NS``, for the multi-host suite)."""
        self.folder = folder
        self.address = address
        self.prefix = prefix
        self.data = folder / "data"
        self.socket_dir = folder / "socket"
        self.log = folder / "postgres.log"
        self.port = free_port()
        self.bindir = postgres_bindir()
        self._as_root = os.geteuid() == 0
        self.started = False

    def database_url(self, name: str) -> str:
        return f"postgresql://postgres@{self.address}:{self.port}/{name}"

    def _run(self, *command: str, timeout: float = 120) -> str:
        argv = [str(self.bindir / command[0]), *command[1:]]
        if self._as_root:
            argv = ["runuser", "-u", POSTGRES_USER, "--", *argv]
        argv = [*self.prefix, *argv]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd="/")
        if result.returncode != 0:
            raise RuntimeError(
                f"{command[0]} failed ({result.returncode}): {result.stderr.strip()[-2000:]}\n{self._log_tail()}"
            )
        return result.stdout

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def init(self) -> PostgresCluster:
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        if self._as_root:
            owner = pwd.getpwnam(POSTGRES_USER)
            for path in (self.folder, self.socket_dir):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"
        )
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\nlisten_addresses = '{self.address}'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.socket_dir}'\nmax_connections = 200\n"
                "fsync = on\nshared_buffers = 32MB\n"
            )
        if self.address != "127.0.0.1":  # the multi-host suite's hosts connect from its private subnet
            with (self.data / "pg_hba.conf").open("a") as hba:
                hba.write("host all all samenet trust\n")
        return self

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")
        self.started = True

    def restart(self, mode: str = "fast") -> None:
        """Stop (``fast``: roll back and disconnect every session; ``immediate``: as a crash) and start."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self) -> None:
        if self.started:
            with suppress(RuntimeError, subprocess.SubprocessError):
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "60", "stop")
            self.started = False

    def execute(self, sql: str, params: tuple[object, ...] = (), database: str = "postgres") -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.database_url(database), autocommit=True, connect_timeout=10) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def create_database(self, name: str) -> str:
        self.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    @contextmanager
    def refusing_connections(self, database: str) -> Iterator[None]:
        """The database refuses new connections, and its sessions are ended, until the block ends."""
        self.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        self.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (database,))
        try:
            yield
        finally:
            self.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')


class RedisServer:
    """``redis-server`` on a free loopback port, as a child process, keeping nothing on disk."""

    def __init__(self, folder: Path, address: str = "127.0.0.1", prefix: tuple[str, ...] = ()) -> None:
        self.folder = folder
        self.address = address
        self.prefix = prefix  # as PostgresCluster's
        self.port = free_port()
        self.log = folder / "redis.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.address}:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not on the PATH")
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    *self.prefix,
                    binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    self.address,
                    "--protected-mode",  # no password: its own private subnet is all that reaches it
                    "no" if self.address != "127.0.0.1" else "yes",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                    "--dir",
                    str(self.folder),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {self.log.read_text(errors='replace')[-1000:]}")
            try:
                with socket.create_connection((self.address, self.port), timeout=1) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer within 30 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()
