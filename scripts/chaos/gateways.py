"""The processes the chaos suite runs and breaks: the fake upstream and the gateways.

Each gateway is ``tollgate serve`` on its own port, as an operator runs it — a real process, so that
``kill -9`` really kills it mid-stream and a restart really starts from the database — all of them on
the suite's PostgreSQL ledger and Redis. The upstream is the test suite's fake provider
(``tests/support/fake_upstream.py``) in a process of its own, so its work does not share the load
generator's interpreter; faults are asked of it per request, with directives in the user text.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from domain.transparency.keys import signer_from_seed
from scripts.chaos.clusters import free_port

UPSTREAM_KEY = "chaos-upstream-secret"
UPSTREAM_KEY_ENV = "CHAOS_UPSTREAM_KEY"
ADMIN_KEY = "chaos-admin-secret-0123456789abcdef"  # at least 32 characters, or the gateway refuses to start
#: Variables that would point the processes started here at another configuration or database.
_OVERRIDES = ("TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL", "TOLLGATE_REDIS_URL")

#: The models the traffic uses: one per upstream wire, on the fake upstream. A short read timeout
#: turns an upstream that hangs into a 504 quickly.
MODELS = {"chaos-gpt": "openai", "chaos-codex": "openai-responses", "chaos-claude": "anthropic"}
#: USD per million tokens, as the configuration gives them (exact decimals).
PRICES = {"input": "2.5", "output": "10", "cache_create": "3.125", "cache_hit": "1.25"}
CREDITS_PER_USD = 100
UPSTREAM_TIMEOUT = 2
MAX_OUTPUT_TOKENS = 256


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _OVERRIDES}
    return {**env, UPSTREAM_KEY_ENV: UPSTREAM_KEY, "TOLLGATE_ADMIN_KEY": ADMIN_KEY}


def tollgate_command() -> list[str]:
    script = Path(sys.executable).parent / "tollgate"
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


def write_config(folder: Path, database_url: str, redis_url: str, upstream_url: str, extra: str = "") -> Path:
    """The gateways' configuration: the suite's ledger and Redis, the three models on the fake
    (``extra``: top-level settings of a mode's own)."""
    prices = ", ".join(f"{kind} = {value}" for kind, value in PRICES.items())
    models = []
    for model_id, kind in MODELS.items():
        base = upstream_url if kind == "anthropic" else upstream_url + "/v1"
        models.append(f"""
[[models]]
id = "{model_id}"
display_name = "{model_id}"
owned_by = "chaos"
context_window = 8192
max_output_tokens = {MAX_OUTPUT_TOKENS}
pricing = {{{prices}}}
upstream = {{kind = "{kind}", base_url = "{base}", api_key_env = "{UPSTREAM_KEY_ENV}", model = "{model_id}-upstream", timeout = {UPSTREAM_TIMEOUT}, connect_timeout = {UPSTREAM_TIMEOUT}}}
""")  # noqa: E501 (a TOML inline table is one line)
    config = folder / "tollgate.toml"
    # the transparency log signed as it grows: ledger verify then checks every checkpoint signed under
    # the faults against the tree of the events (no fork, no lost leaf, each consistent with the next)
    (folder / "log.key").write_text(signer_from_seed("chaos.tollgate.test/ledger", secrets.token_bytes(32)).key_string)
    # max_key_failures_per_minute: the load generator is one address that stands for every client, and
    # the key revocations' 401s would spend its budget of wrong keys; past it the throttle refuses
    # every key a process has not served yet, valid ones too, as it should for one client (its own
    # tests: tests/e2e/test_key_guesses.py) — which seed 15 made the checker's "429 without a rate
    # limit that binds" 34 times.
    config.write_text(f"""database_url = "{database_url}"
redis_url = "{redis_url}"
credits_per_usd = {CREDITS_PER_USD}
max_key_failures_per_minute = 100000
lease_idle_seconds = 0.5
shutdown_timeout = 5
database_pool_size = 4
log_format = "json"
{extra}{"".join(models)}
[transparency]
key_file = "log.key"
checkpoint_seconds = 0.5
""")
    return config


def _wait_until(url: str, process: subprocess.Popen[bytes], log: Path, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited ({process.returncode}): {log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{what} was not ready within {timeout:.0f} s: {log.read_text(errors='replace')[-2000:]}")


@dataclass
class FakeUpstreamProcess:
    """``python -m tests.support.fake_upstream`` on a free port."""

    folder: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    address: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def start(self) -> FakeUpstreamProcess:
        log = self.folder / "upstream.log"
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.fake_upstream",
                    "--host",
                    self.address,
                    "--port",
                    str(self.port),
                    "--api-key",
                    UPSTREAM_KEY,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=child_env(),
            )
        _wait_until(self.url + "/v1/models", self.process, log, "the fake upstream", 60)
        return self

    def stop(self) -> None:
        _terminate(self.process, 10)
        self.process = None


@dataclass
class GatewayProcess:
    """One ``tollgate serve`` on a fixed port (a restart comes back on the same one); everything it
    prints is appended to ``gateway-N.log``."""

    index: int
    config: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    #: The pids this gateway ran as, in order (a restart is a new process).
    pids: list[int] = field(default_factory=list)
    #: Where it listens, what runs it on its host (a network namespace: ``ip netns exec NS``, which
    #: execs the gateway itself, so the pid is the gateway's), and its host's own environment (its
    #: ledger clock's offset).
    address: str = "127.0.0.1"
    prefix: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    @property
    def log(self) -> Path:
        return self.config.parent / f"gateway-{self.index}.log"

    def launch(self) -> None:
        """Start the process without waiting for it (several start side by side)."""
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    *self.prefix,
                    *tollgate_command(),
                    "serve",
                    "--config",
                    str(self.config),
                    "--host",
                    self.address,
                    "--port",
                    str(self.port),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**child_env(), **self.env},
                start_new_session=True,
            )
        self.pids.append(self.process.pid)

    def wait_ready(self, timeout: float = 90) -> None:
        assert self.process is not None
        _wait_until(self.url + "/health/ready", self.process, self.log, f"gateway {self.index}", timeout)

    def kill(self) -> None:
        """``kill -9``: no shutdown, no lease returned, no charge settled."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None

    def stop(self) -> int | None:
        """SIGTERM, as an operator stops it; returns its exit status."""
        status = _terminate(self.process, 30)
        self.process = None
        return status

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int:
        """The process id while it runs, else 0."""
        return self.process.pid if self.process is not None and self.process.poll() is None else 0


def _terminate(process: subprocess.Popen[bytes] | None, timeout: float) -> int | None:
    if process is None or process.poll() is not None:
        return None if process is None else process.returncode
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None


def run_cli(config: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """A ``tollgate`` command on the gateways' configuration, as an operator runs it."""
    return subprocess.run(
        [*tollgate_command(), *args, "--config", str(config)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=timeout,
    )
