"""Finding and reading the configuration file, as every command and every serving worker does."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings_file import CONFIG_ENV, NoConfigFile, load_settings
from domain.settings import ConfigError

#: The demo's configuration: an SQLite ledger by a relative path, the built-in demo upstream.
CONFIG = (Path(__file__).resolve().parents[3] / "examples" / "demo.toml").read_text()


def test_no_file_named_says_how_to_name_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    with pytest.raises(ConfigError) as refused:  # every command and worker already says a ConfigError
        load_settings(None)
    assert isinstance(refused.value, NoConfigFile)
    assert str(refused.value) == "no configuration file: pass --config PATH or set TOLLGATE_CONFIG"


def test_the_environment_names_the_file_when_no_option_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tollgate.toml").write_text(CONFIG)
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "tollgate.toml"))
    settings, base = load_settings(None)
    assert settings.models[0].id == "demo-gpt"
    assert base == tmp_path.resolve()  # an SQLite ledger's relative path is relative to it


def test_the_option_wins_over_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "chosen.toml").write_text(CONFIG)
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "missing.toml"))
    settings, _ = load_settings(str(tmp_path / "chosen.toml"))
    assert settings.database_url == "sqlite:///demo.db"


def test_a_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    with pytest.raises(ConfigError, match=f"^{missing}: cannot read the file: No such file or directory$"):
        load_settings(str(missing))
