"""The gateway under measurement: a ledger with one team and key made by the real command line, and the
real application built from that configuration with its lifespan started, called as uvicorn calls it, its
upstream client's ``post`` answering with the case's canned response."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from app.http.server import create_asgi_app
from app.runtime import build_runtime
from app.upstream.client import Timeouts
from domain.settings import parse_settings
from scripts.relay_cost.canned import CASES, CannedResponse, json_bytes

KEY_ENV = "RELAY_COST_UPSTREAM_KEY"

MODEL = """
[[models]]
id = "{id}"
display_name = "{id}"
owned_by = "bench"
context_window = 200000
max_output_tokens = 4096
pricing = {{input = 2.5, output = 10.0, cache_create = 3.125, cache_hit = 1.25}}
upstream = {{kind = "{kind}", base_url = "http://127.0.0.1:9/v1", api_key_env = "{env}", model = "{name}"}}
"""


def _cli(config: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, KEY_ENV: "k"},
    )
    return done.stdout.strip().splitlines()[-1]


def setup(workdir: Path) -> tuple[Path, str]:
    config = workdir / "tollgate.toml"
    config.write_text(
        f'database_url = "sqlite:///{workdir / "ledger.db"}"\ncredits_per_usd = 100\n'
        + MODEL.format(id="bench-gpt", kind="openai", env=KEY_ENV, name="gpt-x")
        + MODEL.format(id="bench-claude", kind="anthropic", env=KEY_ENV, name="claude-x")
    )
    _cli(config, "team", "create", "bench", "--credits", "1000000000")
    key = _cli(config, "key", "create", "--team", "bench", "--rpm", "100000000", "--tpm", "100000000000")
    return config, key


class Driver:
    """The application with its lifespan started, called as uvicorn calls it."""

    def __init__(self, config: Path, key: str) -> None:
        os.environ[KEY_ENV] = "k"
        settings = parse_settings(config.read_text(), str(config))
        self.runtime = build_runtime(settings, config.parent)
        self.app = create_asgi_app(self.runtime)
        self.key = key
        self.case = CASES["chat"]
        self.runtime.http.post = self._post  # type: ignore[method-assign,assignment]
        self._lifespan: asyncio.Task[None] | None = None
        self._started = asyncio.Event()
        self._stop = asyncio.Event()

    async def _post(self, url: str, content: bytes, headers: dict[str, str], timeouts: Timeouts) -> CannedResponse:
        _, _, reads, apart = self.case
        return CannedResponse(reads, apart)

    async def start(self) -> None:
        async def receive() -> dict[str, Any]:
            if not self._started.is_set():
                return {"type": "lifespan.startup"}
            await self._stop.wait()
            return {"type": "lifespan.shutdown"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "lifespan.startup.complete":
                self._started.set()
            elif message["type"].endswith("failed"):
                raise RuntimeError(message)

        self._lifespan = asyncio.create_task(
            self.app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
        )
        await self._started.wait()

    async def stop(self) -> None:
        self._stop.set()
        if self._lifespan is not None:
            await self._lifespan

    async def request(self) -> int:
        path, body, _, _ = self.case
        raw = json_bytes(body)
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"gateway.local"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(raw)).encode()),
                (b"authorization", f"Bearer {self.key}".encode()),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 80),
            "state": {},
        }
        bodies = [{"type": "http.request", "body": raw, "more_body": False}]
        complete = asyncio.Event()
        status = 0

        async def receive() -> dict[str, Any]:
            if bodies:
                return bodies.pop()
            await complete.wait()  # as uvicorn: the client's disconnect, once the answer was sent
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif not message.get("more_body", False):
                complete.set()

        await self.app(scope, receive, send)
        return status
