"""The gateway in this process, for the unit layer: the real Litestar application
(``create_asgi_app``, what uvicorn serves) over a real ``Runtime`` on a real ledger database, driven
by Litestar's test client, with no port of its own and no subprocess.

Money is asserted on the ledger itself: teams are opened and credited through the admin API, as an
operator would, and after ``stop`` (the runtime's own shutdown: every request settled, leases
returned, the writer flushed) the store is opened afresh and read — balances, charges, and a replay
of every event (``verify_ledger``). Nothing here reaches into the ledger service's internals, so
the tests survive its refactors; the two functions that must (``charge_of``, ``team_state``) read
the store, whose API is app/store's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from litestar.testing import TestClient

from app.http.server import create_asgi_app
from app.runtime import Runtime, build_runtime
from app.store.event_store import LedgerStore, open_ledger_store
from app.store.read_models import ChargeRecord
from app.store.store_errors import StoreUnreachable
from domain.ledger import team_id
from domain.settings import Settings, parse_settings
from projections.audit import verify_ledger
from tests.support.gateway import ADMIN_KEY

ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}


@dataclass(frozen=True)
class Account:
    """A team opened through the admin API, and one key of it."""

    name: str
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.key}"}


@dataclass
class Sent:
    """What an ASGI app sent for one request, message by message."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    frames: list[bytes] = field(default_factory=list)

    def sse_data(self) -> list[Any]:
        """The JSON of every ``data:`` line of the frames sent (``[DONE]`` left out)."""
        found = []
        for line in b"".join(self.frames).decode().splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                found.append(json.loads(line.removeprefix("data: ")))
        return found

    def chat_text(self) -> str:
        """The text of the Chat Completions deltas sent."""
        return "".join(
            choice["delta"].get("content") or "" for chunk in self.sse_data() for choice in chunk.get("choices", [])
        )


class InProcessGateway:
    """One gateway: its runtime, its application and a test client running it (lifespan included)."""

    def __init__(self, config: Path) -> None:
        self.config = config
        self.settings: Settings = parse_settings(config.read_text(), str(config))
        self.runtime: Runtime = build_runtime(self.settings, config.parent)
        self.client = TestClient(create_asgi_app(self.runtime), base_url="http://gateway.local")
        self.client.__enter__()  # runs the application's startup: the runtime's loops start
        self._running = True

    def stop(self) -> None:
        """The runtime's own shutdown: settle what is held, give leases back, flush and close the ledger."""
        if self._running:
            self._running = False
            self.client.__exit__(None, None, None)

    # -- the admin API ------------------------------------------------------------------------

    def admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        answer = self.client.request(method, "/admin" + path, json=body, headers=ADMIN)
        assert answer.status_code < 300, answer.text
        return answer.json()

    def open_team(self, name: str, balance: str = "100") -> Account:
        self.admin("POST", "/teams", {"name": name, "credits": balance})
        return Account(name, self.admin("POST", f"/teams/{name}/keys", {})["key"])

    # -- requests -----------------------------------------------------------------------------

    def post(self, account: Account, path: str, body: dict[str, Any], **headers: str) -> httpx.Response:
        return self.client.post(path, json=body, headers={**account.headers, **headers})

    def hang_up(self, account: Account, path: str, body: dict[str, Any], *, after_frames: int) -> Sent:
        """Stream ``path`` and hang up once ``after_frames`` body frames have reached the client, as
        a server tells an application: ``receive`` answers ``http.disconnect``. The next frame is
        never taken (its ``send`` waits until the relay is cancelled), so the client got exactly
        the frames in the answer."""
        raw = json.dumps(body).encode()
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
                (b"authorization", f"Bearer {account.key}".encode()),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("gateway.local", 80),
            "state": {},
        }
        sent = Sent()

        async def drive() -> None:
            hung_up = asyncio.Event()
            bodies = [{"type": "http.request", "body": raw, "more_body": False}]

            async def receive() -> dict[str, Any]:
                if bodies:
                    return bodies.pop()
                await hung_up.wait()
                return {"type": "http.disconnect"}

            async def send(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    sent.status = message["status"]
                    sent.headers = {k.decode(): v.decode() for k, v in message["headers"]}
                    return
                if hung_up.is_set():
                    await asyncio.Event().wait()  # the client is gone: this frame never arrives
                if message.get("body"):
                    sent.frames.append(message["body"])
                if len(sent.frames) >= after_frames:
                    hung_up.set()

            await self.client.app(scope, receive, send)

        self.client.blocking_portal.call(drive)  # on the application's own event loop
        return sent


@contextmanager
def ledger_of(gateway: InProcessGateway) -> Iterator[LedgerStore]:
    """The gateway's ledger, opened afresh once the gateway has stopped; every event must replay."""
    gateway.stop()
    store = open_ledger_store(gateway.settings.database_url, gateway.config.parent)
    try:
        assert verify_ledger(store).ok, "the ledger does not replay to the balances it recorded"
        yield store
    finally:
        store.close()


@dataclass(frozen=True)
class TeamState:
    balance: int
    #: Held by requests and leases, in micro-credits.
    held: int
    #: How many events the team's history has: one per durable write of it.
    events: int


def team_state(store: LedgerStore, name: str) -> TeamState:
    """A team as its events leave it (``store`` may be a running gateway's: it is only read)."""
    team = store.find_team(team_id(name))
    assert team is not None, f"no team {name}"
    return TeamState(team.balance, team.held, team.version)


def charge_of(store: LedgerStore, name: str, request_id: str) -> ChargeRecord | None:
    """The one charge of a request, if it was charged."""
    return store.find_charge(team_id(name), request_id)


def in_credits(micros: int) -> Decimal:
    """Micro-credits as the API shows them: an exact decimal number of credits."""
    return Decimal(micros) / 1_000_000


@contextmanager
def ledger_refusing_writes(gateway: InProcessGateway) -> Iterator[None]:
    """Inside the block, the ledger's database refuses every write, as a read-only one does; reads
    still work. (The store's one write method is swapped on this gateway's store only.)"""
    store = gateway.runtime.store

    def refused(*args: object, **kwargs: object) -> None:
        raise StoreUnreachable("cannot execute INSERT in a read-only transaction")

    store.save_teams = refused  # type: ignore[method-assign]
    try:
        yield
    finally:
        del store.save_teams  # the class's own method again


def top_up_from_another_process(gateway: InProcessGateway, name: str, micros: int) -> None:
    """Credit a team through a ledger writer of its own on the same database, as the CLI does from
    another process: the gateway's writer learns of it only when its next save conflicts."""
    from app.ledger.service import LedgerService
    from app.ledger.writer import LedgerWriter

    store = open_ledger_store(gateway.settings.database_url, gateway.config.parent)
    try:
        with LedgerWriter(store) as writer:
            LedgerService(writer).top_up(name, micros, "from another process")
    finally:
        store.close()
