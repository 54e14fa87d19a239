"""The `tollgate` command, in the exact forms scripts rely on."""

from __future__ import annotations

import os
import subprocess
from decimal import Decimal

import openai
import pytest

from app.store.event_store import open_ledger_store
from domain.ledger import team_id
from domain.settings import parse_settings
from tests.support.backend import RawDatabase
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import Gateway, run_cli, tollgate_command, write_config
from tests.support.long_history import build_history


@pytest.fixture
def config(tmp_path, fake_upstream: FakeUpstream):
    return write_config(tmp_path, fake_upstream.base_url)


def test_team_key_and_credits_commands_drive_a_working_account(config):
    created = run_cli(config, "team", "create", "acme", "--credits", "12.5")
    assert "acme" in created.stdout
    assert "12.5" in created.stdout
    key = run_cli(config, "key", "create", "--team", "acme").stdout.strip().splitlines()[-1]
    assert key.startswith("tg-")
    added = run_cli(config, "credits", "add", "--team", "acme", "7.5")
    assert "balance 20" in added.stdout

    gateway = Gateway(config).start()
    try:
        with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as client:
            completion = client.chat.completions.create(model="demo-gpt", messages=[{"role": "user", "content": "hi"}])
            left = Decimal(str(completion.usage.model_extra["remaining"]["credits"]))
            assert 0 < 20 - left < Decimal("0.01")
            # A top-up from another process while the gateway runs is seen by the next request.
            run_cli(config, "credits", "add", "--team", "acme", "1")
            completion = client.chat.completions.create(model="demo-gpt", messages=[{"role": "user", "content": "hi"}])
            assert Decimal(str(completion.usage.model_extra["remaining"]["credits"])) > left
    finally:
        gateway.stop()
    assert run_cli(config, "ledger", "verify").returncode == 0


def test_only_the_key_hash_is_stored(config):
    run_cli(config, "team", "create", "acme")
    key = run_cli(config, "key", "create", "--team", "acme").stdout.splitlines()[-1]
    stored = RawDatabase.of_config(config).everything_stored()
    assert b"acme" in stored
    assert key.encode() not in stored


def test_top_ups_the_ledger_cannot_record_exactly_are_refused(config):
    run_cli(config, "team", "create", "acme")
    for amount in ("0.0000001", "-5", "lots", "0", "NaN", "Infinity", "-0", "10000000000000", "1e999999"):
        result = run_cli(config, "credits", "add", "--team", "acme", amount, check=False)
        assert result.returncode == 2, amount
        assert "invalid credit amount" in result.stderr


def test_a_second_team_with_the_same_name_is_refused(config):
    run_cli(config, "team", "create", "acme", "--credits", "1")
    result = run_cli(config, "team", "create", "acme", "--credits", "1", check=False)
    assert result.returncode == 1
    assert "already exists" in result.stderr


def test_commands_on_an_unknown_team_say_so(config):
    for args in (("key", "create", "--team", "ghost"), ("credits", "add", "--team", "ghost", "1")):
        result = run_cli(config, *args, check=False)
        assert result.returncode == 1
        assert "team 'ghost' does not exist" in result.stderr


def test_an_invalid_config_stops_serve_naming_the_file_and_key(tmp_path, config):
    bad = tmp_path / "bad.toml"
    bad.write_text(config.read_text().replace("context_window = 8192", 'context_window = "lots"'))
    result = subprocess.run(
        [*tollgate_command(), "serve", "--config", str(bad)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert f"{bad}: models[0].context_window: expected `int`, got `str`" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_refuses_to_start_without_the_upstream_key(config):
    env = {k: v for k, v in os.environ.items() if k != "UPSTREAM_KEY"}
    result = subprocess.run(
        [*tollgate_command(), "serve", "--config", str(config)], capture_output=True, text=True, timeout=30, env=env
    )
    assert result.returncode == 2
    assert "models[0].upstream.api_key_env: environment variable UPSTREAM_KEY is not set" in result.stderr


@pytest.mark.parametrize("command", ["serve", "demo"])
def test_serve_refuses_to_start_with_a_short_admin_key(config, command: str):
    env = {**os.environ, "UPSTREAM_KEY": "x", "TOLLGATE_ADMIN_KEY": "admin-password-31-characters-xx"}
    result = subprocess.run(
        [*tollgate_command(), command, "--config", str(config), "--port", "99999"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        (
            f"tollgate: error: {config}: admin_key_env: the admin key in TOLLGATE_ADMIN_KEY is 31 characters long; "
            "it must be at least 32 (make one with: openssl rand -hex 32)"
        )
    ]


def test_the_config_can_come_from_the_environment(config):
    result = subprocess.run(
        [*tollgate_command(), "team", "create", "envteam"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "TOLLGATE_CONFIG": str(config)},
    )
    assert result.returncode == 0, result.stderr
    missing = subprocess.run(
        [*tollgate_command(), "team", "create", "x"],
        capture_output=True,
        text=True,
        timeout=30,
        env={k: v for k, v in os.environ.items() if k != "TOLLGATE_CONFIG"},
    )
    assert missing.returncode == 2
    assert "--config" in missing.stderr


def test_ledger_verify_fails_on_a_tampered_event(config):
    run_cli(config, "team", "create", "acme", "--credits", "10")
    run_cli(config, "credits", "add", "--team", "acme", "5")
    assert run_cli(config, "ledger", "verify").returncode == 0

    raw = RawDatabase.of_config(config)
    event_id, state = raw.events("CreditsAdded")[-1]
    raw.set_event_state(event_id, state.replace(b'"amount":5000000', b'"amount":6000000'))

    result = run_cli(config, "ledger", "verify", check=False)
    assert result.returncode == 1
    assert "FAILED" in result.stderr
    assert "team 'acme'" in result.stderr
    assert "balance_after 15000000 but replay gives 16000000" in result.stderr


def test_ledger_verify_checks_every_snapshot_and_rebuild_takes_them_again(tmp_path, fake_upstream: FakeUpstream):
    """A snapshot altered (its digest fails) or rewritten with a valid digest over a wrong balance fails
    verify, naming the team and the version; a rebuild drops them and takes them again from its replay
    (every ``snapshot_every`` of the configuration), and verify is clean again."""
    config = write_config(tmp_path, fake_upstream.base_url, settings="snapshot_every = 10")
    settings = parse_settings(config.read_text(), str(config))
    store = open_ledger_store(settings.database_url, config.parent, pool_size=2)
    build_history(store, {"acme": 40}, batch=4, snapshot_every=20)  # 83 events, a snapshot every 20 of them
    newest, older = (store.team_snapshots.latest(team_id("acme"), upto_version=v) for v in (83, 62))
    assert newest is not None
    assert older is not None
    lying = store.team_snapshots.restore(older)
    assert lying is not None
    lying.balance -= 5
    store.team_snapshots.replace([store.team_snapshots.take(lying)])  # a valid digest over the wrong balance
    store.close()
    raw = RawDatabase.of_config(config)
    altered = bytearray(newest.state)
    altered[len(altered) // 2] ^= 0x01  # one bit of the stored (compressed) state
    raw.execute("UPDATE team_snapshots SET state = ? WHERE version = ?", (bytes(altered), newest.version))

    result = run_cli(config, "ledger", "verify", check=False)
    assert result.returncode == 1
    assert f"snapshot of team 'acme' at version {older.version} differs from the replay: balance" in result.stderr
    assert f"snapshot of team 'acme' at version {newest.version} fails its digest" in result.stderr

    rebuilt = run_cli(config, "ledger", "rebuild")
    assert "team snapshots (one every 10 events of a team) from 83 events" in rebuilt.stdout
    assert [v for (v,) in raw.execute("SELECT version FROM team_snapshots ORDER BY version")] == list(range(10, 81, 10))
    verified = run_cli(config, "ledger", "verify")
    assert "Team snapshots checked against the replay: 8, all equal to it." in verified.stdout


def test_balances_beyond_32_bits_of_micro_credits_are_kept(config):
    run_cli(config, "team", "create", "whale", "--credits", "5000000")  # 5e12 micro-credits
    run_cli(config, "credits", "add", "--team", "whale", "0.000001")
    assert "balance 5000000.000001 credits" in run_cli(config, "team", "show", "whale").stdout
    assert run_cli(config, "ledger", "verify").returncode == 0


def test_ledger_history_and_export_refuse_pages_and_times_out_of_range(config):
    run_cli(config, "team", "create", "acme", "--credits", "1")
    for args in (("--page", str(10**30)), ("--page", "0"), ("--per-page", "0"), ("--per-page", "100000")):
        result = run_cli(config, "ledger", "history", "--team", "acme", *args, check=False)
        assert result.returncode == 2, result.stderr
        assert args[0] in result.stderr, result.stderr
        assert "Traceback" not in result.stderr, result.stderr
    result = run_cli(config, "ledger", "export", "--team", "acme", "--since", "last week", check=False)
    assert result.returncode == 2
    assert "--since" in result.stderr
    assert "acme" in run_cli(config, "ledger", "history", "--team", "acme", "--page", "1000000").stdout


def test_a_database_that_cannot_be_reached_is_one_clear_line_not_a_traceback(tmp_path, fake_upstream: FakeUpstream):
    """An operator's command against a PostgreSQL server that refuses connections says so in one line
    and exits 1 (a traceback was printed before)."""
    unreachable = write_config(tmp_path, fake_upstream.base_url, database="postgresql://postgres@127.0.0.1:1/nowhere")
    for args in (("team", "create", "nobody", "--credits", "1"), ("ledger", "verify")):
        result = run_cli(unreachable, *args, check=False)
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stderr
        assert result.stderr.startswith("tollgate: error: the ledger's database cannot be used: connection failed"), (
            result.stderr
        )
