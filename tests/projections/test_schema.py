"""Alembic owns the read models, and only them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.backend import RawDatabase
from tests.gateway import run_cli, write_config
from projections.migrations import HEAD

ROOT = Path(__file__).resolve().parents[2]


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
