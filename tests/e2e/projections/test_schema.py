"""Alembic owns the read models, and only them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from projections.migrations import HEAD
from tests.support.backend import RawDatabase
from tests.support.gateway import run_cli, write_config

ROOT = Path(__file__).resolve().parents[3]


def alembic(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(ROOT / "alembic.ini"), "-x", f"config={config}", *args],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_db_upgrade_creates_the_event_store_and_the_read_models(tmp_path):
    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    result = run_cli(config, "db", "upgrade")
    assert "Database ready" in result.stdout
    raw = RawDatabase.of_config(config)
    assert {raw.db.events_table, "api_keys", "team_balances", "alembic_version"} <= raw.tables()


def test_the_migrations_match_the_schema_and_leave_the_event_store_alone(tmp_path):
    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    run_cli(config, "team", "create", "acme", "--credits", "1")
    check = alembic(config, "check")
    assert check.returncode == 0, check.stderr
    assert "No new upgrade operations detected" in check.stdout + check.stderr
    current = alembic(config, "current")
    assert f"{HEAD} (head)" in current.stdout


def test_the_recorded_head_revision_is_the_newest_migration():
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from projections.migrations import HEAD, MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD


def test_a_ledger_upgraded_in_place_refuses_a_second_charge_of_what_it_charged_before(tmp_path):
    """Migration 0006 fills the once-only charge index from the charges already recorded."""
    from decimal import Decimal

    from app.ledger.writer import LedgerWriter
    from domain.ledger import team_id
    from domain.pricing import Price, TokenUsage
    from domain.settings import parse_settings
    from projections.event_store import open_ledger_store

    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    run_cli(config, "team", "create", "acme", "--credits", "10")
    settings = parse_settings(config.read_text(), str(config))
    store = open_ledger_store(settings.database_url, config.parent)
    price = Price(Decimal(1), Decimal(1), Decimal(1), Decimal(1))
    with LedgerWriter(store) as writer:
        for rid in ("r1", "r2"):
            writer.on_team(team_id("acme"), "acme", lambda t, r=rid: t.place_hold(r, 10, "k", "m", "chat")).result()
            writer.on_team(team_id("acme"), "acme", lambda t, r=rid: t.charge(
                r, TokenUsage(1, 1), price, Decimal(100), key_id="k", model="m", endpoint="chat")).result()
    store.close()
    down = alembic(config, "downgrade", "0005")
    assert down.returncode == 0, down.stderr
    assert "charged_requests" not in RawDatabase.of_config(config).tables()
    assert "Database ready" in run_cli(config, "db", "upgrade").stdout
    rows = RawDatabase.of_config(config).execute("SELECT request_id, charged FROM charged_requests ORDER BY request_id")
    assert rows == [("r1", 200), ("r2", 200)]
    assert run_cli(config, "ledger", "verify").returncode == 0


def test_a_ledger_upgraded_in_place_reports_its_charges_by_attribution_and_verifies(tmp_path):
    """Usage by attribution after an upgrade from 0009: every charge recorded before it had no
    attribution, so it counts under no end user (0010 fills it from the usage already projected;
    0012 projects the whole history again, this usage with it)."""
    from decimal import Decimal

    from app.ledger.writer import LedgerWriter
    from domain.ledger import team_id
    from domain.pricing import Price, TokenUsage
    from domain.settings import parse_settings
    from projections.event_store import open_ledger_store

    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    run_cli(config, "team", "create", "acme", "--credits", "10")
    settings = parse_settings(config.read_text(), str(config))
    store = open_ledger_store(settings.database_url, config.parent)
    price = Price(Decimal(1), Decimal(1), Decimal(1), Decimal(1))
    with LedgerWriter(store) as writer:
        for rid in ("r1", "r2"):
            writer.on_team(team_id("acme"), "acme", lambda t, r=rid: t.place_hold(r, 10, "k", "m", "chat")).result()
            writer.on_team(team_id("acme"), "acme", lambda t, r=rid: t.charge(
                r, TokenUsage(1, 1), price, Decimal(100), key_id="k", model="m", endpoint="chat")).result()
    store.close()
    run_cli(config, "ledger", "history", "--team", "acme")  # the audit history and usage, projected
    down = alembic(config, "downgrade", "0009")
    assert down.returncode == 0, down.stderr
    assert "usage_by_attribution" not in RawDatabase.of_config(config).tables()
    assert "Database ready" in run_cli(config, "db", "upgrade").stdout
    run_cli(config, "ledger", "history", "--team", "acme")  # 0012 projects the history again, usage with it
    rows = RawDatabase.of_config(config).execute("SELECT team_name, dimension, value, requests, cost "
                                                 "FROM usage_by_attribution")
    assert rows == [("acme", "user", "", 2, 400)]
    assert run_cli(config, "ledger", "verify").returncode == 0
    shown = run_cli(config, "usage", "--team", "acme", "--by", "tag:project", "--format", "csv").stdout
    assert shown.splitlines()[1:] == [",2,2,2,0,0,0.0004,400"]  # untagged: every charge, under ""
