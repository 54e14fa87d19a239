"""The three servers of the benchmark as real processes: the fast upstream, the bare proxy and
``tollgate serve`` with a generated configuration, on loopback ports.

Tollgate runs as an operator would run it — billing on, a team and a key from the ``tollgate``
command, the key with rate limits set (so every request goes through the limiter) but far too high
to bind — on a fresh ledger: a new SQLite file, or a new PostgreSQL database dropped afterwards.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from scripts.bench.cases import BEDROCK, CLAUDE, EMBEDDING, GPT
from scripts.bench.procstat import process_tree

UPSTREAM_KEY_ENV = "BENCH_UPSTREAM_KEY"
#: Variables that would override the generated configuration of the processes started here.
_OVERRIDES = ("TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL", "TOLLGATE_REDIS_URL")
TEAM = "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: The AWS credential chain's environment for the Bedrock cases, and nothing else it could look for.
_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIDBENCHEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "bench-secret-access-key",
    "AWS_CONFIG_FILE": "/nonexistent/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _OVERRIDES}
    return {**env, UPSTREAM_KEY_ENV: "bench-upstream-key", **_AWS_ENV, **extra}


def tollgate_command() -> list[str]:
    script = Path(sys.executable).parent / "tollgate"
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


@dataclass
class Server:
    """A server process on a loopback port, its output in a log file."""

    name: str
    command: list[str]
    port: int
    log: Path
    env: dict[str, str] = field(default_factory=child_env)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """The process id of a started server."""
        if self.process is None:
            raise RuntimeError(f"{self.name} was never started")
        return self.process.pid

    def start(self, timeout: float = 60) -> Server:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.process.returncode}): {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} did not answer within {timeout:.0f} s: {self.log.read_text()[-2000:]}")

    def pids(self) -> list[int]:
        return process_tree(self.process.pid) if self.process else []

    def stop(self) -> None:
        """SIGTERM, as an operator stops it (Tollgate gives its credit leases back); SIGKILL after 30 s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def fast_upstream(workdir: Path) -> Server:
    port = free_port()
    return Server(
        "fast upstream",
        [sys.executable, "-m", "scripts.bench.fast_upstream", "--port", str(port)],
        port,
        workdir / "upstream.log",
    )


def granian(app: str, port: int, workers: int, *, factory: bool = False) -> list[str]:
    """The command serving the ASGI ``app`` (an import string) with Granian, as uvicorn serves it:
    uvloop, no access log, ``workers`` processes."""
    command = [str(Path(sys.executable).parent / "granian"), "--interface", "asgi", "--loop", "uvloop"]
    command += [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--no-ws",
        "--log-level",
        "warning",
    ]
    return [*command, *(["--factory"] if factory else []), app]


def bare_proxy(workdir: Path, upstream: Server, workers: int, server: str = "uvicorn") -> Server:
    port = free_port()
    if server == "granian":
        env = child_env(BENCH_UPSTREAM_URL=upstream.url)
        return Server(
            "bare proxy", granian("scripts.bench.bare_proxy:app", port, workers), port, workdir / "floor.log", env
        )
    return Server(
        "bare proxy",
        [
            sys.executable,
            "-m",
            "scripts.bench.bare_proxy",
            "--upstream",
            upstream.url,
            "--port",
            str(port),
            "--workers",
            str(workers),
        ],
        port,
        workdir / "floor.log",
    )


def _config(database_url: str, upstream: Server, redis_url: str | None) -> str:
    redis = f'redis_url = "{redis_url}"' if redis_url else ""
    model = """
[[models]]
id = "{id}"
display_name = "{id}"
owned_by = "bench"
context_window = 200000
max_output_tokens = 4096
pricing = {{input = 2.5, output = 10.0, cache_create = 3.125, cache_hit = 1.25}}
upstream = {{kind = "{kind}", base_url = "{base}", api_key_env = "{env}", model = "{name}"}}
"""
    return f'database_url = "{database_url}"\ncredits_per_usd = 100\n{redis}\n' + "".join(
        (
            model.format(id=GPT, kind="openai", base=upstream.url + "/v1", env=UPSTREAM_KEY_ENV, name="gpt-x"),
            model.format(id=CLAUDE, kind="anthropic", base=upstream.url, env=UPSTREAM_KEY_ENV, name="claude-x"),
            _BEDROCK_MODEL.format(id=BEDROCK, base=upstream.url),
            _EMBEDDING_MODEL.format(
                id=EMBEDDING, base=upstream.url + "/v1", env=UPSTREAM_KEY_ENV, name="text-embedding-x"
            ),
        )
    )


#: The Bedrock cases' model: Claude on the fast upstream's InvokeModel paths, signed with the
#: benchmark's AWS credentials (``child_env``), which the fast upstream does not check.
_BEDROCK_MODEL = """
[[models]]
id = "{id}"
display_name = "{id}"
owned_by = "bench"
context_window = 200000
max_output_tokens = 4096
pricing = {{input = 2.5, output = 10.0, cache_create = 3.125, cache_hit = 1.25}}
upstream = {{kind = "bedrock", region = "us-east-1", base_url = "{base}", model = "anthropic.claude-x-v1:0"}}
"""

#: The embeddings case's model: it serves embeddings only, priced per input token.
_EMBEDDING_MODEL = """
[[models]]
id = "{id}"
display_name = "{id}"
owned_by = "bench"
context_window = 8191
max_output_tokens = 1
endpoints = ["embeddings"]
pricing = {{input = 0.02}}
upstream = {{kind = "openai", base_url = "{base}", api_key_env = "{env}", model = "{name}"}}
"""


def run_cli(config: Path, *args: str) -> str:
    result = subprocess.run(
        [*tollgate_command(), *args, "--config", str(config)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=600,
    )
    if result.returncode != 0:
        raise RuntimeError(f"tollgate {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


@dataclass
class Ledger:
    """A fresh ledger for one Tollgate configuration: its config file, the bench team's key, and
    (for PostgreSQL) the database to drop at the end."""

    backend: str
    config: Path
    key: str = ""
    #: Every bench team's key, the first team's (``key``) first: ``--teams N`` spreads the load over them.
    keys: list[str] = field(default_factory=list)
    postgres_admin: str | None = None
    database: str | None = None

    def verify(self) -> tuple[bool, int, str]:
        """``tollgate ledger verify``: whether the history checks out, and how many charges it holds."""
        result = subprocess.run(
            [*tollgate_command(), "ledger", "verify", "--config", str(self.config)],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=1800,
        )
        found = re.search(r"(\d+) charges", result.stdout)
        return result.returncode == 0, int(found.group(1)) if found else -1, (result.stdout + result.stderr).strip()

    def drop(self) -> None:
        if self.database and self.postgres_admin:
            import psycopg

            with psycopg.connect(self.postgres_admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')


@dataclass(frozen=True, slots=True)
class Configuration:
    """One configuration the benchmark measures Tollgate in: a ledger backend and a number of workers."""

    backend: str  # "sqlite" or "postgresql"
    workers: int


@dataclass(frozen=True, slots=True)
class Services:
    """The shared services a ledger may need: the PostgreSQL server its database is created on (an
    admin URL), and the Redis that more than one worker share their rate limits through."""

    postgres_admin: str
    redis_url: str


def new_ledger(
    workdir: Path, upstream: Server, configuration: Configuration, services: Services, *, teams: int = 1
) -> Ledger:
    """A ledger with the bench team (credits that never run out) and its key (limits that never bind);
    with ``teams`` above 1, that many teams in all, each with such a key (``scripts/bench/teams.py``)."""
    backend, workers = configuration.backend, configuration.workers
    postgres_admin, redis_url = services.postgres_admin, services.redis_url
    name = f"tollgate_bench_{uuid.uuid4().hex[:10]}"
    ledger = Ledger(backend, workdir / f"{name}.toml")
    if backend == "sqlite":
        database_url = f"sqlite:///{workdir / (name + '.db')}"
    else:
        import psycopg

        with psycopg.connect(postgres_admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        ledger.postgres_admin, ledger.database = postgres_admin, name
        database_url = urlunsplit(urlsplit(postgres_admin)._replace(path="/" + name))
    ledger.config.write_text(_config(database_url, upstream, redis_url if workers > 1 else None))
    run_cli(ledger.config, "team", "create", TEAM, "--credits", "1000000000")
    ledger.key = (
        run_cli(ledger.config, "key", "create", "--team", TEAM, "--rpm", "100000000", "--tpm", "100000000000")
        .strip()
        .splitlines()[-1]
    )
    ledger.keys = [ledger.key]
    if teams > 1:
        made = subprocess.run(
            [sys.executable, "-m", "scripts.bench.teams", str(ledger.config), "1", str(teams - 1)],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=600,
        )
        if made.returncode != 0:
            raise RuntimeError(f"creating the bench teams failed ({made.returncode}): {made.stderr.strip()}")
        ledger.keys += made.stdout.split()
    return ledger


def tollgate(
    workdir: Path, ledger: Ledger, workers: int, env: dict[str, str] | None = None, server: str = "uvicorn"
) -> Server:
    """``env``: variables of its own (``--stalls``: the timeline's file); ``server``: ``granian`` serves
    each worker's application (``app_from_environment``) with Granian instead of ``tollgate serve``'s uvicorn."""
    port = free_port()
    if server == "granian":
        command = granian("app.http.serving:app_from_environment", port, workers, factory=True)
        extra = {"TOLLGATE_CONFIG": str(ledger.config), **(env or {})}
        return Server("tollgate", command, port, workdir / "tollgate.log", child_env(**extra))
    return Server(
        "tollgate",
        [*tollgate_command(), "serve", "--config", str(ledger.config), "--port", str(port), "--workers", str(workers)],
        port,
        workdir / "tollgate.log",
        child_env(**(env or {})),
    )
