"""The benchmark's ledger: a database (a SQLite file, or a PostgreSQL database created for it), the
configuration ``tollgate`` runs on it with, its teams and their keys — and a manifest of all that in
the work folder, so that ``--keep DIR`` reuses a ledger built by an earlier run.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

from app.store.database import Database, Sql
from app.store.event_store import open_ledger_store
from domain.ledger import team_id

UPSTREAM_KEY_ENV = "BENCH_UPSTREAM_KEY"  # the variable scripts/bench/servers.py gives every process it starts
MODEL = "bench-gpt"
CREDITS_PER_USD = 100
#: The model's price (USD per million tokens), as the configuration below sets it.
PRICES = ("2.5", "10.0", "3.125", "1.25")
BIG = "big"
BASELINE = "baseline"  # the team with about 1,000 events the big team is compared with
#: Small teams beside the big one: name → events in its history.
SMALL = {BASELINE: 1000, "small-1": 100, "small-2": 100}
#: The small team whose events are appended before a restart, so that the gateway does not warm
#: the others (``build.bury``); its first request also takes the process's own first-request costs.
FILLER = "small-2"


@dataclass
class Team:
    name: str
    key: str  # the API key's secret
    key_id: str

    @property
    def id(self) -> UUID:
        return team_id(self.name)


@dataclass
class Ledger:
    """Where one backend's ledger lives, and what is in it."""

    backend: str
    workdir: Path
    database_url: str
    postgres_admin: str | None = None
    teams: dict[str, Team] = field(default_factory=dict)
    built_events: int = 0  # the big team's events the build asked for (0: not built yet)
    build: dict[str, Any] = field(default_factory=dict)  # what the build measured

    @property
    def config(self) -> Path:
        return self.workdir / f"{self.backend}.toml"

    @property
    def manifest(self) -> Path:
        return self.workdir / f"{self.backend}.json"

    @property
    def database(self) -> Database:
        return Database.from_url(self.database_url, self.workdir)

    def sql(self) -> Sql:
        """A plain connection to the ledger's database (write SQL with ``?``); close it after use."""
        return Sql(self.database)

    def save(self) -> None:
        data = asdict(self)
        data["workdir"] = str(self.workdir)
        self.manifest.write_text(json.dumps(data, indent=1))

    def write_config(self, upstream_url: str, snapshot_every: int) -> None:
        """The gateway's configuration: this ledger, the fast upstream, one model (the upstream's
        address changes from run to run, so it is written again each time)."""
        price = dict(zip(("input", "output", "cache_create", "cache_hit"), PRICES, strict=True))
        pricing = ", ".join(f"{k} = {v}" for k, v in price.items())
        self.config.write_text(f"""database_url = "{self.database_url}"
credits_per_usd = {CREDITS_PER_USD}
snapshot_every = {snapshot_every}

[[models]]
id = "{MODEL}"
display_name = "{MODEL}"
owned_by = "bench"
context_window = 200000
max_output_tokens = 4096
pricing = {{{pricing}}}
upstream = {{kind = "openai", base_url = "{upstream_url}/v1", api_key_env = "{UPSTREAM_KEY_ENV}", model = "gpt-x"}}
""")

    def drop(self) -> None:
        """Drop a PostgreSQL ledger's database (a SQLite file goes with its folder)."""
        if self.postgres_admin is None:
            return
        import psycopg

        name = self.database.dbname
        with psycopg.connect(
            Database.from_url(self.postgres_admin, Path()).conninfo(), autocommit=True, connect_timeout=5
        ) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def kept(workdir: Path, backend: str) -> Ledger | None:
    """The ledger an earlier run built in ``workdir`` for this backend, if it is still there."""
    manifest = workdir / f"{backend}.json"
    if not manifest.exists():
        return None
    data = json.loads(manifest.read_text())
    teams = {name: Team(**team) for name, team in data.pop("teams").items()}
    ledger = Ledger(**{**data, "workdir": workdir, "teams": teams})
    usable = False
    path = ledger.database.path
    if ledger.built_events and (path is None or path.exists()):
        try:  # opening it migrates the read models of a ledger an older checkout built
            store = open_ledger_store(ledger.database_url, workdir, pool_size=1)
            try:
                usable = (store.recorder.max_notification_id() or 0) > 0
            finally:
                store.close()
        except Exception:  # noqa: BLE001 - a database that cannot be reached is one to build again
            usable = False
    if not usable:  # a build that did not finish: its PostgreSQL database goes
        with contextlib.suppress(Exception):
            ledger.drop()
        return None
    return ledger


def new_ledger(workdir: Path, backend: str, postgres_admin: str) -> Ledger:
    """A fresh, empty database for the backend (PostgreSQL: a new database on that server)."""
    if backend == "sqlite":
        path = workdir / "sqlite-ledger.db"
        for stale in workdir.glob("sqlite-ledger.db*"):
            stale.unlink()
        return Ledger(backend, workdir, f"sqlite:///{path}")
    import psycopg

    name = "tg_scale_" + uuid.uuid4().hex[:10]
    admin = Database.from_url(postgres_admin, Path())
    with psycopg.connect(admin.conninfo(), autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = urlunsplit(urlsplit(postgres_admin)._replace(path="/" + name))
    return Ledger(backend, workdir, url, postgres_admin=postgres_admin)
