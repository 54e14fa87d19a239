"""Alembic owns the read models, and only them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.store.migrations import HEAD
from domain.attribution import Attribution
from domain.ledger_holds import RequestOnLedger
from tests.support.backend import RawDatabase
from tests.support.gateway import run_cli, write_config

ROOT = Path(__file__).resolve().parents[3]


def alembic(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "alembic", "-c", str(ROOT / "alembic.ini"), "-x", f"config={config}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
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

    from app.store.migrations import HEAD, MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD


def test_a_ledger_upgraded_in_place_refuses_a_second_charge_of_what_it_charged_before(tmp_path):
    """Migration 0006 fills the once-only charge index from the charges already recorded."""
    from decimal import Decimal

    from app.ledger.writer import LedgerWriter
    from app.store.event_store import open_ledger_store
    from domain.ledger import team_id
    from domain.pricing import Price
    from domain.settings import parse_settings
    from domain.usage import TokenUsage

    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    run_cli(config, "team", "create", "acme", "--credits", "10")
    settings = parse_settings(config.read_text(), str(config))
    store = open_ledger_store(settings.database_url, config.parent)
    price = Price(Decimal(1), Decimal(1), Decimal(1), Decimal(1))
    with LedgerWriter(store) as writer:
        for rid in ("r1", "r2"):
            writer.on_team(
                team_id("acme"), "acme", lambda t, r=rid: t.place_hold(RequestOnLedger(r, "k", "m", "chat"), 10)
            ).result()
            writer.on_team(
                team_id("acme"),
                "acme",
                lambda t, r=rid: t.charge(RequestOnLedger(r, "k", "m", "chat"), TokenUsage(1, 1), price, Decimal(100)),
            ).result()
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
    from app.store.event_store import open_ledger_store
    from domain.ledger import team_id
    from domain.pricing import Price
    from domain.settings import parse_settings
    from domain.usage import TokenUsage

    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    run_cli(config, "team", "create", "acme", "--credits", "10")
    settings = parse_settings(config.read_text(), str(config))
    store = open_ledger_store(settings.database_url, config.parent)
    price = Price(Decimal(1), Decimal(1), Decimal(1), Decimal(1))
    with LedgerWriter(store) as writer:
        for rid in ("r1", "r2"):
            writer.on_team(
                team_id("acme"), "acme", lambda t, r=rid: t.place_hold(RequestOnLedger(r, "k", "m", "chat"), 10)
            ).result()
            writer.on_team(
                team_id("acme"),
                "acme",
                lambda t, r=rid: t.charge(RequestOnLedger(r, "k", "m", "chat"), TokenUsage(1, 1), price, Decimal(100)),
            ).result()
    store.close()
    run_cli(config, "ledger", "history", "--team", "acme")  # the audit history and usage, projected
    down = alembic(config, "downgrade", "0009")
    assert down.returncode == 0, down.stderr
    assert "usage_by_attribution" not in RawDatabase.of_config(config).tables()
    assert "Database ready" in run_cli(config, "db", "upgrade").stdout
    run_cli(config, "ledger", "history", "--team", "acme")  # 0012 projects the history again, usage with it
    rows = RawDatabase.of_config(config).execute(
        "SELECT team_name, dimension, value, requests, cost FROM usage_by_attribution"
    )
    assert rows == [("acme", "user", "", 2, 400)]
    assert run_cli(config, "ledger", "verify").returncode == 0
    shown = run_cli(config, "usage", "--team", "acme", "--by", "tag:project", "--format", "csv").stdout
    assert shown.splitlines()[1:] == [",2,2,2,0,0,0.0004,400"]  # untagged: every charge, under ""


def test_an_upgrade_to_0015_projects_again_a_history_the_new_rules_would_not_make(tmp_path):
    """0015 bounds usage by attribution and makes unstorable text storable: a history projected by
    the rules before (more tag names in a day than the bounds allow; on SQLite, NUL stored as it came)
    is projected again, so that ``ledger verify`` agrees with it; one within the rules is left alone."""
    from decimal import Decimal

    from app.ledger.writer import LedgerWriter
    from app.store.event_store import open_ledger_store
    from domain.ledger import team_id
    from domain.pricing import Price
    from domain.settings import parse_settings
    from domain.usage import TokenUsage

    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    run_cli(config, "team", "create", "acme", "--credits", "10")
    settings = parse_settings(config.read_text(), str(config))
    store = open_ledger_store(settings.database_url, config.parent)
    price = Price(Decimal(1), Decimal(1), Decimal(1), Decimal(1))
    with LedgerWriter(store) as writer:
        for i in range(3):
            tags = {f"t{i}x{j}": "v" for j in range(10)}  # 30 tag names in a day
            writer.on_team(
                team_id("acme"), "acme", lambda t, i=i: t.place_hold(RequestOnLedger(f"r{i}", "k", "m", "chat"), 10)
            ).result()
            request = RequestOnLedger(f"r{i}", "k", "m", "chat", Attribution(tags, "someone"))
            writer.on_team(
                team_id("acme"), "acme", lambda t, r=request: t.charge_priced(r, TokenUsage(1, 1), price, Decimal(100))
            ).result()
    store.close()
    raw = RawDatabase.of_config(config)

    def dimensions() -> int:
        return raw.execute("SELECT COUNT(DISTINCT dimension) FROM usage_by_attribution")[0][0]

    run_cli(config, "ledger", "history", "--team", "acme")  # projected, within the bounds
    assert dimensions() == 1 + 20
    assert alembic(config, "downgrade", "0014").returncode == 0
    assert "Database ready" in run_cli(config, "db", "upgrade").stdout
    assert raw.execute("SELECT notification_id FROM projection_tracking")[0][0] > 0  # within the rules: left alone

    assert alembic(config, "downgrade", "0014").returncode == 0
    day = raw.execute("SELECT day FROM usage_by_attribution LIMIT 1")[0][0]
    raw.execute(
        "INSERT INTO usage_by_attribution SELECT team_name, 'tag:t2x' || ?, 'v', day, requests, input_tokens, "
        "output_tokens, cache_write_tokens, cache_hit_tokens, cost FROM usage_by_attribution "
        "WHERE dimension = 'user' AND day = ?",
        ("9", day),
    )  # what the rules before counted: a 22nd name
    assert dimensions() == 1 + 21
    assert "Database ready" in run_cli(config, "db", "upgrade").stdout
    assert raw.execute("SELECT notification_id FROM projection_tracking")[0][0] == 0
    run_cli(config, "ledger", "history", "--team", "acme")
    assert dimensions() == 1 + 20
    assert run_cli(config, "ledger", "verify").returncode == 0

    if raw.db.kind == "sqlite":  # PostgreSQL's text never could hold NUL
        assert alembic(config, "downgrade", "0014").returncode == 0
        raw.execute("UPDATE ledger_entries SET end_user = 'some' || char(0) || 'one' WHERE kind = 'charge'")
        assert "Database ready" in run_cli(config, "db", "upgrade").stdout
        assert raw.execute("SELECT notification_id FROM projection_tracking")[0][0] == 0
        run_cli(config, "ledger", "history", "--team", "acme")
        assert raw.execute("SELECT DISTINCT end_user FROM ledger_entries WHERE kind = 'charge'") == [("someone",)]
        assert run_cli(config, "ledger", "verify").returncode == 0


def test_an_upgrade_to_0018_fills_usage_by_endpoint_from_the_audit_history_and_verifies(tmp_path):
    """0018 makes ``usage_by_endpoint`` and fills it with the charges the audit history already holds,
    summed by team, endpoint and day: what the projection would have written, so ``ledger verify``
    agrees at once, and the charges after the upgrade are added to it."""
    from decimal import Decimal

    from app.ledger.writer import LedgerWriter
    from app.store.event_store import open_ledger_store
    from domain.ledger import team_id
    from domain.pricing import Price
    from domain.settings import parse_settings
    from domain.usage import TokenUsage

    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    run_cli(config, "team", "create", "acme", "--credits", "10")
    settings = parse_settings(config.read_text(), str(config))
    price = Price(Decimal(1), Decimal(1), Decimal(1), Decimal(1))

    def charge(requests: list[tuple[str, str]]) -> None:
        store = open_ledger_store(settings.database_url, config.parent)
        with LedgerWriter(store) as writer:
            for rid, endpoint in requests:
                request = RequestOnLedger(rid, "k", "m", endpoint)
                writer.on_team(team_id("acme"), "acme", lambda t, r=request: t.place_hold(r, 10)).result()
                writer.on_team(
                    team_id("acme"),
                    "acme",
                    lambda t, r=request: t.charge(r, TokenUsage(1, 1), price, Decimal(100)),
                ).result()
        store.close()

    charge([("r1", "chat.completions"), ("r2", "embeddings"), ("r3", "chat.completions")])
    run_cli(config, "ledger", "history", "--team", "acme")  # the audit history, projected
    raw = RawDatabase.of_config(config)
    projected = raw.execute("SELECT * FROM usage_by_endpoint ORDER BY endpoint")
    assert [r[1] for r in projected] == ["chat.completions", "embeddings"]
    down = alembic(config, "downgrade", "0017")
    assert down.returncode == 0, down.stderr
    assert "usage_by_endpoint" not in raw.tables()
    assert "Database ready" in run_cli(config, "db", "upgrade").stdout
    assert raw.execute("SELECT * FROM usage_by_endpoint ORDER BY endpoint") == projected
    assert [r[3:] for r in projected] == [(2, 2, 2, 0, 0, 400), (1, 1, 1, 0, 0, 200)]
    assert run_cli(config, "ledger", "verify").returncode == 0
    charge([("r4", "embeddings")])
    run_cli(config, "ledger", "history", "--team", "acme")
    assert raw.execute("SELECT requests, cost FROM usage_by_endpoint ORDER BY endpoint") == [(2, 400), (2, 400)]
    assert run_cli(config, "ledger", "verify").returncode == 0
