"""Running Tollgate as a user does: a config file, the ``tollgate`` command, a real port."""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support import plain_http
from tests.support.backend import REDIS_URL, new_database_url
from tests.support.children import end_server, start_server, watch_server
from tests.support.cli_fork import ForkedServer, run_tollgate, spawn_tollgate

UPSTREAM_KEY = "upstream-secret"
ADMIN_KEY = "admin-secret-for-tests-0123456789ab"  # at least 32 characters, or the gateway refuses to start
GATEWAY_ENV = {"UPSTREAM_KEY": UPSTREAM_KEY, "TOLLGATE_ADMIN_KEY": ADMIN_KEY}


#: Gateways are forked from a process that has imported the application (tests/support/cli_fork.py),
#: except those with workers; ``TOLLGATE_TEST_FORK_GATEWAYS=0`` starts every one as a new ``tollgate``.
FORK_GATEWAYS = os.environ.get("TOLLGATE_TEST_FORK_GATEWAYS", "1") != "0"

#: How long a starting gateway may take to answer (seconds), however loaded the machine.
READY_WITHIN = 90


def tollgate_command() -> list[str]:
    script = Path(sys.executable).parent / "tollgate"
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


#: Ports below the kernel's ephemeral range are never handed out by it, neither to an outgoing
#: connection's local end nor to a socket bound to port 0 (every fake upstream's): a port found free
#: there stays free until the server it was found for binds it, but for another ``free_port``'s
#: random pick of the same one meanwhile.
_LOWEST_PORT = 10_000
#: Drawn from the system's randomness, not the random module's state, which tests (and Hypothesis)
#: seed: two processes seeded alike would draw the same ports one after the other.
_PORT_DRAW = random.SystemRandom()


def _ephemeral_ports_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def free_port() -> int:
    """A loopback port free now, for a server started next. Drawn at random below the ephemeral
    range where it can be (see ``_LOWEST_PORT``); a port the kernel picked, as before, where not.
    (One picked by the kernel and let go was taken by another process's outgoing connection before a
    gateway could bind it: "address already in use", and a module's tests lost their gateway.)"""
    ceiling = _ephemeral_ports_start()
    for _ in range(50 if ceiling > _LOWEST_PORT + 1_000 else 0):
        port = _PORT_DRAW.randrange(_LOWEST_PORT, ceiling)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # a server listens there, or a connection of one lingers
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: Sockets bound and never listened on, held while the test process lives (``refusing_port``).
_HELD: list[socket.socket] = []


def refusing_port() -> int:
    """A port that refuses every connection for as long as this test process lives: bound here and
    never listened on, so no other process can take it meanwhile. (A port found free and let go, as
    ``free_port`` gives, was sometimes taken by a fake upstream of the other half of the suite before
    the request that needed it refused: the "dead" upstream then answered 401.)"""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    _HELD.append(held)
    return int(held.getsockname()[1])


def write_config(
    directory: Path,
    upstream_base_url: str,
    *,
    database: str | None = None,
    redis: bool = False,
    settings: str = "",
    lease_idle_seconds: str = "0.3",
    key_failures_per_minute: int = 100_000,
) -> Path:
    """A configuration with a model on the fake upstream, one on the built-in demo upstream, and
    one whose upstream is down (nothing listens on its port). ``redis``: rate limits in Redis, as
    several gateway processes on one database need; ``settings``: more top-level TOML lines.
    ``key_failures_per_minute``: every test's client is 127.0.0.1, and many send wrong keys on
    purpose; the throttle of failed key attempts is tested with a small one of its own. A test gateway
    keeps two PostgreSQL connections for its event store (up to four under load), not the default ten:
    two halves of the suite share the server with others, and the tests send a few requests at once."""
    config = directory / "tollgate.toml"
    root = upstream_base_url.removesuffix("/v1")
    config.write_text(f"""
database_url = "{database or new_database_url()}"
database_pool_size = 2
credits_per_usd = 100
lease_idle_seconds = {lease_idle_seconds}
max_key_failures_per_minute = {key_failures_per_minute}
{f'redis_url = "{REDIS_URL}"' if redis else ""}
{settings}

[[models]]
id = "fake-gpt"
display_name = "Fake GPT"
owned_by = "acme"
context_window = 8192
max_output_tokens = 1024
vision = false
default_effort_level = "medium"
effort_levels = [{{value = "low", display = "Low"}}, {{value = "medium", display = "Medium"}},
                 {{value = "high", display = "High"}}]
pricing = {{input = 2.5, output = 10.0, cache_create = 3.125, cache_hit = 1.25}}
upstream = {{kind = "openai", base_url = "{upstream_base_url}", api_key_env = "UPSTREAM_KEY", model = "gpt-x"}}

[[models]]
id = "demo-gpt"
display_name = "Demo GPT"
owned_by = "tollgate"
context_window = 4096
max_output_tokens = 256
pricing = {{input = 1, output = 2, cache_create = 1.25, cache_hit = 0.1}}
upstream = {{kind = "demo"}}

[[models]]
id = "fake-claude"
display_name = "Fake Claude"
owned_by = "anthropic"
context_window = 200000
max_output_tokens = 4096
vision = true
effort_levels = [{{value = "low", display = "Low"}}, {{value = "medium", display = "Medium"}},
                 {{value = "high", display = "High"}}, {{value = "xhigh", display = "Extra high"}}]
pricing = {{input = 3, output = 15, cache_create = 3.75, cache_hit = 0.3}}
upstream = {{kind = "anthropic", base_url = "{root}", api_key_env = "UPSTREAM_KEY", model = "claude-x"}}

[[models]]
id = "slow-gpt"
display_name = "Slow GPT"
owned_by = "acme"
context_window = 4096
max_output_tokens = 256
pricing = {{input = 1, output = 2, cache_create = 1.25, cache_hit = 0.1}}
upstream = {_deployment("openai", upstream_base_url, "gpt-x", api_key_env="UPSTREAM_KEY", timeout=1, connect_timeout=1)}

[[models]]
id = "dead-gpt"
display_name = "Dead GPT"
owned_by = "nobody"
context_window = 4096
max_output_tokens = 256
pricing = {{input = 1, output = 2, cache_create = 1.25, cache_hit = 0.1}}
upstream = {{kind = "openai", base_url = "http://127.0.0.1:{refusing_port()}/v1", timeout = 5}}

[[models]]
id = "small-claude"
display_name = "Small Claude"
owned_by = "anthropic"
context_window = 2048
max_output_tokens = 256
vision = true
pricing = {{input = 3, output = 15, cache_create = 3.75, cache_hit = 0.3}}
upstream = {{kind = "anthropic", base_url = "{root}", api_key_env = "UPSTREAM_KEY", model = "claude-x"}}

[[models]]
id = "vision-gpt"
display_name = "Vision GPT"
owned_by = "acme"
context_window = 8192
max_output_tokens = 1024
vision = true
pricing = {{input = 2.5, output = 10.0, cache_create = 3.125, cache_hit = 1.25}}
upstream = {{kind = "openai", base_url = "{upstream_base_url}", api_key_env = "UPSTREAM_KEY", model = "gpt-x"}}

[[models]]
id = "fake-codex"
display_name = "Fake Codex"
owned_by = "acme"
context_window = 200000
max_output_tokens = 4096
vision = true
effort_levels = [{{value = "low", display = "Low"}}, {{value = "medium", display = "Medium"}},
                 {{value = "high", display = "High"}}, {{value = "xhigh", display = "Extra high"}}]
pricing = {{input = 1.25, output = 10, cache_create = 1.25, cache_hit = 0.125}}
upstream = {_deployment("openai-responses", upstream_base_url, "gpt-codex-x", api_key_env="UPSTREAM_KEY")}
{_agent_models(upstream_base_url)}{_builtin_tool_models(upstream_base_url)}{_fallback_models(upstream_base_url)}\
{_strict_models(upstream_base_url)}{_clamping_models(upstream_base_url)}""")
    return config


#: Models for the coding agents (tests/e2e/test_coding_agents.py), one per upstream wire: large enough
#: for their prompts (a long system prompt, a dozen tools) and their output limits (32,000 tokens).
AGENT_MODELS = {
    "agent-claude": "anthropic",
    "agent-gpt": "openai",
    "agent-codex": "openai-responses",
    "agent-gemini": "gemini",
}


#: Prices (USD per million tokens) the extra models below are charged at.
CHEAP = "{input = 1, output = 2, cache_create = 1.25, cache_hit = 0.1}"


def _model(
    model_id: str,
    deployments: list[str],
    *,
    context_window: int,
    max_output_tokens: int,
    pricing: str = CHEAP,
    settings: str = "",
) -> str:
    """One ``[[models]]`` table: its deployments (``_deployment``), limits, prices and other settings."""
    upstream = f"upstream = {deployments[0]}" if len(deployments) == 1 else f"upstreams = [{', '.join(deployments)}]"
    return f"""
[[models]]
id = "{model_id}"
display_name = "{model_id}"
owned_by = "acme"
context_window = {context_window}
max_output_tokens = {max_output_tokens}
pricing = {pricing}
{upstream}
{settings}
"""


def _agent_models(upstream_base_url: str) -> str:
    root = upstream_base_url.removesuffix("/v1")
    return "".join(
        _model(
            model_id,
            [
                _deployment(
                    kind,
                    root if kind in ("anthropic", "gemini") else upstream_base_url,
                    f"{model_id}-upstream",
                    api_key_env="UPSTREAM_KEY",
                )
            ],
            context_window=400000,
            max_output_tokens=128000,
            settings="vision = true",
            pricing="{input = 0.5, output = 1, cache_create = 0.625, cache_hit = 0.05}",
        )
        for model_id, kind in AGENT_MODELS.items()
    )


def _builtin_tool_models(upstream_base_url: str) -> str:
    """Models whose ``builtin_tools`` setting overrides the default (tests/e2e/test_tool_translation.py)."""
    root = upstream_base_url.removesuffix("/v1")
    models = {
        "passing-gpt": ("openai", upstream_base_url, "pass"),
        "refusing-claude": ("anthropic", root, "refuse"),
        "dropping-claude": ("anthropic", root, "drop"),
    }
    return "".join(
        _model(
            model_id,
            [_deployment(kind, base_url, f"{model_id}-upstream", api_key_env="UPSTREAM_KEY")],
            context_window=8192,
            max_output_tokens=1024,
            settings=f'builtin_tools = "{policy}"',
        )
        for model_id, (kind, base_url, policy) in models.items()
    )


#: Strict models, one per upstream kind: no vision, built-in tools refused, small limits (8,192
#: tokens of context, 1,024 of output): every refusal a request can meet, on every kind of upstream.
STRICT_MODELS = {
    "strict-gpt": "openai",
    "strict-demo": "demo",
    "strict-claude": "anthropic",
    "strict-codex": "openai-responses",
}


def _strict_models(upstream_base_url: str) -> str:
    root = upstream_base_url.removesuffix("/v1")

    def deployment(model_id: str, kind: str) -> str:
        if kind == "demo":
            return '{kind = "demo"}'
        return _deployment(
            kind, root if kind == "anthropic" else upstream_base_url, f"{model_id}-upstream", api_key_env="UPSTREAM_KEY"
        )

    return "".join(
        _model(
            model_id,
            [deployment(model_id, kind)],
            context_window=8192,
            max_output_tokens=1024,
            settings='vision = false\nbuiltin_tools = "refuse"',
        )
        for model_id, kind in STRICT_MODELS.items()
    )


#: Models that serve a request asking more output than their 1,024 tokens with 1,024
#: (``clamp_output_to_model``), one per upstream kind (tests/e2e/test_context_window.py).
CLAMPING_MODELS = {"clamping-gpt": "openai", "clamping-claude": "anthropic", "clamping-codex": "openai-responses"}


def _clamping_models(upstream_base_url: str) -> str:
    root = upstream_base_url.removesuffix("/v1")
    return "".join(
        _model(
            model_id,
            [
                _deployment(
                    kind,
                    root if kind in ("anthropic", "gemini") else upstream_base_url,
                    f"{model_id}-upstream",
                    api_key_env="UPSTREAM_KEY",
                )
            ],
            context_window=8192,
            max_output_tokens=1024,
            settings="clamp_output_to_model = true",
        )
        for model_id, kind in CLAMPING_MODELS.items()
    )


#: A weight that makes a deployment the first one tried in all but one request in a million.
FIRST = 1_000_000


def _deployment(kind: str, base_url: str, model: str, **extra: object) -> str:
    fields = {"kind": kind, "base_url": base_url, "model": model, **extra}
    return "{" + ", ".join(f"{k} = {v}" if isinstance(v, int) else f'{k} = "{v}"' for k, v in fields.items()) + "}"


def _fallback_models(upstream_base_url: str) -> str:
    """Models with several deployments (tests/e2e/test_fallbacks.py): a broken deployment tried first
    (refusing connections, answering 503 or 529, never answering, or breaking off a 200) and a working
    one, or two working ones. Each deployment has its own model name, so the fake's records tell which
    one was called."""
    root = upstream_base_url.removesuffix("/v1")
    key = {"api_key_env": "UPSTREAM_KEY"}
    gpt_b = _deployment("openai", upstream_base_url, "gpt-b", **key)
    claude_b = _deployment("anthropic", root, "claude-b", **key)
    overloaded_first = _deployment("openai", f"{root}/status/503/v1", "gpt-a", weight=FIRST)
    models = {
        "refused-gpt": [_deployment("openai", f"http://127.0.0.1:{refusing_port()}/v1", "gpt-a", weight=FIRST), gpt_b],
        "overloaded-gpt": [overloaded_first, gpt_b],
        "hung-gpt": [_deployment("openai", f"{root}/hang/v1", "gpt-a", weight=FIRST, timeout=1), gpt_b],
        "twin-gpt": [
            _deployment("openai", upstream_base_url, "gpt-a", weight=3, timeout=2, **key),
            _deployment("openai", upstream_base_url, "gpt-b", timeout=2, **key),
        ],
        "once-gpt": [overloaded_first, gpt_b],  # with max_attempts = 1
        "cut-gpt": [_deployment("openai", f"{root}/cut/v1", "gpt-a", weight=FIRST), gpt_b],
        "overloaded-claude": [_deployment("anthropic", f"{root}/status/529", "claude-a", weight=FIRST), claude_b],
        "twin-claude": [_deployment("anthropic", root, "claude-a", **key), claude_b],
    }
    return "".join(
        _model(
            model_id,
            deployments,
            context_window=200000,
            max_output_tokens=256,
            settings="max_attempts = 1" if model_id == "once-gpt" else "",
        )
        for model_id, deployments in models.items()
    )


def run_cli(config: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``tollgate ARGS --config CONFIG`` in a process of its own, forked from one that has imported the
    CLI already (tests/support/cli_fork.py: a fresh Python would spend most of the run importing)."""
    result = run_tollgate([*args, "--config", str(config)], {**os.environ, **GATEWAY_ENV}, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"tollgate {' '.join(args)} failed ({result.returncode}): {result.stderr}")
    return result


class _PortTaken(RuntimeError):
    """The gateway exited at once: another process held its port."""


@dataclass
class Gateway:
    """A ``tollgate serve`` process on a free loopback port; what it prints goes to ``log_path``."""

    config: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[str] | ForkedServer | None = None
    log_path: Path | None = None
    env: dict[str, str] = field(default_factory=dict)  # more environment (TOLLGATE_CLOCK_OFFSET, …)
    serve_args: tuple[str, ...] = ()  # more arguments to ``tollgate serve`` (``--workers``, …)
    _ever_ready: bool = field(default=False, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Gateway:
        """Start the gateway and wait until it answers. A port found free and let go (``free_port``)
        can still be taken before the gateway binds it (by another test process's server that drew
        the same one), so a gateway that could not bind is started again: on a new port the first
        time it starts, on its own port (once the other has let go) when it is started again after
        ``stop``, since its clients know that address."""
        deadline = time.monotonic() + READY_WITHIN
        while True:
            try:
                return self._start_once()
            except _PortTaken:
                if time.monotonic() > deadline:
                    raise
                if self._ever_ready:
                    time.sleep(0.5)
                else:
                    self.port = free_port()

    def _start_once(self) -> Gateway:
        self.log_path = self.config.parent / f"gateway-{self.port}.log"
        args = ["serve", "--config", str(self.config), "--port", str(self.port), *self.serve_args]
        env = {**os.environ, **GATEWAY_ENV, **self.env}
        if FORK_GATEWAYS and "--workers" not in self.serve_args:
            self.log_path.write_text("")
            self.process = spawn_tollgate(args, env, self.log_path)
            watch_server(self.process.pid)
        else:  # the installed command, from Python's start (workers are spawned from it)
            with self.log_path.open("w") as log:
                self.process = start_server(
                    [*tollgate_command(), *args], stdout=log, stderr=subprocess.STDOUT, text=True, env=env
                )
        # Idle, a gateway is ready in about a second; with both halves of make test and a browser
        # on two cores, a gateway with workers once took more than 30 s (its workers each import the app).
        deadline = time.monotonic() + READY_WITHIN
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = self.output()
                if "address already in use" in output:
                    self.process = None
                    raise _PortTaken(output)
                raise RuntimeError(f"tollgate serve exited: {output}")
            try:
                if plain_http.get(self.base_url + "/models", timeout=1).status_code == 200:
                    self._ever_ready = True
                    return self
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError(f"tollgate serve did not become ready within {READY_WITHIN} s: {self.output()}")

    def output(self) -> str:
        """Everything the gateway printed so far: its banner and its log lines."""
        return self.log_path.read_text() if self.log_path is not None and self.log_path.exists() else ""

    def log_lines(self) -> list[dict]:
        """The gateway's JSON log lines so far (its banner and anything else that is not JSON skipped)."""
        lines = []
        for line in self.output().splitlines():
            if line.startswith("{"):
                with contextlib.suppress(json.JSONDecodeError):  # a line still being written
                    lines.append(json.loads(line))
        return lines

    def access_line(self, request_id: str, within: float = 5.0) -> dict:
        """The request's log line (lines are written in batches, a tenth of a second apart)."""
        deadline = time.monotonic() + within
        while True:
            lines = [
                line
                for line in self.log_lines()
                if line.get("logger") == "tollgate.access" and line.get("request_id") == request_id
            ]
            if lines:
                return lines[0]
            assert time.monotonic() < deadline, f"no log line for {request_id} after {within} s"
            time.sleep(0.05)

    def stop(self) -> str:
        """Stop the gateway the way an operator does (SIGTERM) and return what it printed."""
        if self.process is None:
            return ""
        end_server(self.process)
        self.process = None
        return self.output()

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_cli(self.config, *args, check=check)

    def charges(self, team: str) -> list[dict]:
        """The team's charges, as ``tollgate ledger export`` prints them (amounts in micro-credits)."""
        rows = [
            json.loads(line)
            for line in self.cli("ledger", "export", "--team", team, "--format", "jsonl").stdout.splitlines()
        ]
        return [row for row in rows if row["kind"] == "charge"]

    def wait_until_nothing_held(self, team: str, within: float = 10.0) -> str:
        """Wait until the team holds nothing — every request settled and the gateway's idle credit
        lease given back (``lease_idle_seconds`` after its last use) — and return ``team show``'s line."""
        deadline = time.monotonic() + within
        while "held 0," not in (shown := self.cli("team", "show", team).stdout):
            assert time.monotonic() < deadline, f"still holding after {within} s: {shown}"
            time.sleep(0.1)
        return shown


def verified_gateway(config: Path, env: dict[str, str] | None = None) -> Iterator[Gateway]:
    """A module's own gateway on ``config`` (a fixture yields from it): started, and after the
    module its ledger must replay clean (``tollgate ledger verify``) before it is stopped."""
    gw = Gateway(config, env=env or {}).start()
    yield gw
    result = gw.cli("ledger", "verify", check=False)
    gw.stop()
    assert result.returncode == 0, result.stdout + result.stderr
