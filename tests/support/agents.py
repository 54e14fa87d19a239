"""Running the coding agents our users run — Claude Code, Codex CLI and the Gemini CLI — against a gateway, as they do.

Each agent runs non-interactively (``claude -p``, ``codex exec``) in a temporary home, configured by
the documentation's own recipe (docs/clients.md, ``Coding agents``), through a :class:`RecordingProxy` that keeps every
exchange: the bodies the agent sent (saved as fixtures, secrets removed) and the answers, whose
reported cost the tests compare with the ledger. The agents are installed by
``scripts/ensure_agents.sh`` (``make test`` runs it), at the versions pinned there.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import aiohttp
from aiohttp import web

from tests.support.gateway import Gateway
from tests.support.teams import Team

ROOT = Path(__file__).resolve().parents[2]
AGENTS_DIR = Path(
    os.environ.get("TOLLGATE_AGENTS_DIR")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tollgate" / "agents"
)
CLAUDE_CODE = ("claude-code", "2.1.330", "claude")
CODEX = ("codex", "0.169.0", "codex")
GEMINI_CLI = ("gemini-cli", "0.61.0", "gemini")
#: Headers that belong to one hop, not to the exchange.
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade", "te", "trailer"}


def binary(agent: tuple[str, str, str]) -> Path:
    name, version, command = agent
    path = AGENTS_DIR / f"{name}-{version}" / "node_modules" / ".bin" / command
    assert path.exists(), f"{name} {version} is not installed at {path}: run `sh scripts/ensure_agents.sh`"
    return path


# -- the documentation's recipes (docs/clients.md) -------------------------------------------------


def docs_block(page: str, marker: str) -> str:
    """The code block that follows ``<!-- recipe:MARKER -->`` in ``docs/PAGE``."""
    text = (ROOT / "docs" / page).read_text()
    found = re.search(rf"<!-- recipe:{marker} -->\s*```\w*\n(.*?)```", text, re.DOTALL)
    assert found, f"docs/{page} has no recipe:{marker} block"
    return found.group(1)


def readme_block(marker: str) -> str:
    """The code block that follows ``<!-- recipe:MARKER -->`` in docs/clients.md."""
    return docs_block("clients.md", marker)


def claude_code_environment(root_url: str, key: str, model: str) -> dict[str, str]:
    """The documented ``export`` lines for Claude Code, with this gateway, key and model filled in."""
    env = {}
    for line in readme_block("claude-code").splitlines():
        found = re.match(r"export (\w+)=(\S+)", line.strip())
        if found:
            value = found.group(2).strip('"').replace("$TOLLGATE_API_KEY", key).replace("MODEL_ID", model)
            env[found.group(1)] = value.replace("http://127.0.0.1:8080", root_url)
    return env


def codex_config(root_url: str, model: str) -> str:
    """The documented Codex ``config.toml``, with this gateway and model filled in."""
    return readme_block("codex").replace("http://127.0.0.1:8080", root_url).replace("MODEL_ID", model)


# -- running them --------------------------------------------------------------------------------


def _run(args: list[str], env: dict[str, str], workdir: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    home = tempfile.mkdtemp(prefix="agent-home-")
    return subprocess.run(
        args,
        cwd=workdir,
        env={"PATH": os.environ["PATH"], "HOME": home, "LANG": "C.UTF-8", **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_claude_code(
    root_url: str,
    key: str,
    *,
    model: str,
    prompt: str,
    auth: Literal["token", "api_key"],
    workdir: Path,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``claude -p PROMPT`` with the documented environment, the key as ``ANTHROPIC_AUTH_TOKEN`` (sent as
    ``Authorization: Bearer``) or ``ANTHROPIC_API_KEY`` (sent as ``x-api-key``). ``--allowedTools Bash``
    lets it run its shell tool without asking (it runs as root here, where
    ``--dangerously-skip-permissions`` is refused)."""
    env = claude_code_environment(root_url, key, model)
    if auth == "api_key":
        env["ANTHROPIC_API_KEY"] = env.pop("ANTHROPIC_AUTH_TOKEN")
    env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"  # nothing leaves the machine: no telemetry, no updates
    return _run(
        [str(binary(CLAUDE_CODE)), "-p", prompt, "--model", model, "--allowedTools", "Bash"], env, workdir, timeout
    )


def run_codex(
    root_url: str, key: str, *, model: str, prompt: str, workdir: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``codex exec PROMPT`` with the documented provider block in a fresh ``CODEX_HOME``. Its shell tool
    runs in Codex's own read-only sandbox (its bundled bubblewrap works here)."""
    codex_home = Path(tempfile.mkdtemp(prefix="codex-home-"))
    (codex_home / "config.toml").write_text(codex_config(root_url, model))
    env = {"CODEX_HOME": str(codex_home), "TOLLGATE_API_KEY": key}
    return _run([str(binary(CODEX)), "exec", "--skip-git-repo-check", "--ephemeral", prompt], env, workdir, timeout)


def gemini_cli_environment(root_url: str, key: str) -> dict[str, str]:
    """The documented ``export`` lines for the Gemini CLI, with this gateway and key filled in."""
    env = {}
    for line in readme_block("gemini-cli").splitlines():
        found = re.match(r"export (\w+)=(\S+)", line.strip())
        if found:
            value = found.group(2).strip('"').replace("$TOLLGATE_API_KEY", key)
            env[found.group(1)] = value.replace("http://127.0.0.1:8080", root_url)
    return env


def run_gemini_cli(
    root_url: str, key: str, *, model: str, prompt: str, workdir: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``gemini -p PROMPT -m MODEL`` with the documented environment and settings file in a fresh home.
    The folder it works in is trusted (``GEMINI_CLI_TRUST_WORKSPACE``: headless runs refuse an
    untrusted one), and its read-only tools (``read_file``, ``list_directory``) run without asking."""
    home = Path(tempfile.mkdtemp(prefix="agent-home-"))
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text(readme_block("gemini-cli-settings"))
    env = {**gemini_cli_environment(root_url, key), "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    return subprocess.run(
        [str(binary(GEMINI_CLI)), "-p", prompt, "-m", model],
        cwd=workdir,
        env={"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# -- what passed between them ----------------------------------------------------------------------


@dataclass
class Exchange:
    method: str
    path: str
    request_headers: dict[str, str]  # names in lower case, as are the response's
    request_body: bytes
    status: int = 0
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: bytes = b""
    #: Set once the whole answer is recorded: a client may have read its last chunk a moment before
    #: the proxy finished writing it down.
    finished: threading.Event = field(default_factory=threading.Event)

    def json(self) -> Any:
        return json.loads(self.request_body)


class RecordingProxy:
    """A reverse proxy on a free loopback port, between an agent and the gateway: it relays each
    request, and each answer chunk by chunk as it comes (streams stay streams), and keeps both."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="recording-proxy")
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        assert self._ready.wait(10), "the recording proxy did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        runner = self._loop.run_until_complete(self._start())
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._session.close())
            self._loop.run_until_complete(runner.cleanup())
            self._loop.close()

    async def _start(self) -> web.AppRunner:
        self._session = aiohttp.ClientSession(
            auto_decompress=False, skip_auto_headers=("Accept-Encoding",), timeout=aiohttp.ClientTimeout(total=None)
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._relay)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return runner

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        exchange = Exchange(request.method, request.path_qs, {k.lower(): v for k, v in request.headers.items()}, body)
        with self._lock:
            self.exchanges.append(exchange)
        async with self._session.request(
            request.method, self.target + request.path_qs, data=body, headers=headers, allow_redirects=False
        ) as answer:
            exchange.status = answer.status
            exchange.response_headers = {k.lower(): v for k, v in answer.headers.items()}
            response = web.StreamResponse(
                status=answer.status, headers={k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
            )
            await response.prepare(request)
            chunks = []
            async for chunk in answer.content.iter_any():
                chunks.append(chunk)
                await response.write(chunk)
            exchange.response_body = b"".join(chunks)
            exchange.finished.set()
            await response.write_eof()
            return response


def reported_credits(exchange: Exchange) -> Decimal | None:
    """What the gateway reported as this answer's ``usage.cost.credits``: in a JSON body, or on the
    stream's final usage (a chat usage chunk, Responses' ``response.completed``/``.incomplete``,
    Messages' ``message_delta``, the last Gemini chunk's ``usageMetadata``)."""
    text = exchange.response_body.decode()
    if exchange.response_headers.get("content-type", "").startswith("application/json"):
        answer = json.loads(text, parse_float=Decimal)
        return _cost(answer.get("usage") or answer.get("usageMetadata"))
    found = None
    for line in text.splitlines():
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            continue
        event = json.loads(line[5:], parse_float=Decimal)
        usage = (
            (event.get("response") or {}).get("usage")
            if event.get("type") in ("response.completed", "response.incomplete")
            else event.get("usage") or event.get("usageMetadata")
        )
        found = _cost(usage) if _cost(usage) is not None else found
    return found


def streamed_text(body: bytes) -> str:
    """The text a Messages, Responses or Gemini stream delivered, its deltas joined."""
    text = []
    for line in body.decode().splitlines():
        if line.startswith("data:") and line[5:].strip() != "[DONE]":
            event = json.loads(line[5:])
            delta = event.get("delta")
            for candidate in event.get("candidates") or []:
                text += [p["text"] for p in candidate.get("content", {}).get("parts", []) if "text" in p]
            if event.get("type") == "response.output_text.delta":
                text.append(delta)
            elif isinstance(delta, dict) and delta.get("type") == "text_delta":
                text.append(delta["text"])
    return "".join(text)


def check_charged_as_reported(gateway: Gateway, team: Team, exchanges: list[Exchange]) -> None:
    """Every answer was charged once, exactly what the gateway reported in it; nothing else was."""
    reported = {e.response_headers["x-request-id"]: reported_credits(e) for e in exchanges}
    assert all(amount is not None and amount > 0 for amount in reported.values()), reported
    gateway.wait_until_nothing_held(team.name)
    charged = {row["request_id"]: Decimal(-row["amount"]) / 1_000_000 for row in gateway.charges(team.name)}
    assert charged == reported


def _cost(usage: Any) -> Decimal | None:
    cost = usage.get("cost") if isinstance(usage, dict) else None
    amount = cost.get("credits") if isinstance(cost, dict) else None
    return Decimal(str(amount)) if amount is not None else None


# -- fixtures ------------------------------------------------------------------------------------

#: The request headers worth replaying: the protocol's version and betas.
REPLAYED_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta")


def scrubbed(exchange: Exchange, agent: str, secrets: list[str], places: dict[str, str]) -> dict[str, Any]:
    """A fixture record of a request: its path, the headers worth replaying and its body, with every
    secret replaced by ``REDACTED`` and this run's temporary paths by stable names (``places``, and
    the agents' temporary homes)."""
    text = exchange.request_body.decode()
    for secret in secrets:
        text = text.replace(secret, "REDACTED")
    for path, name in places.items():
        text = text.replace(path, name)
    text = re.sub(r"/tmp/codex-home-\w+", "/home/user/.codex", re.sub(r"/tmp/agent-home-\w+", "/home/user", text))
    headers = {k: v for k, v in exchange.request_headers.items() if k in REPLAYED_HEADERS}
    return {"agent": agent, "path": exchange.path.split("?")[0], "headers": headers, "body": json.loads(text)}


def save_fixture(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
