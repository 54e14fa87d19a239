"""What every ``tollgate`` command shares: finding the config, opening the ledger, reading amounts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from domain.money import AmountError, micros_from_credits
from domain.settings import ConfigError, Settings, parse_settings

CONFIG_ENV = "TOLLGATE_CONFIG"


class CommandError(Exception):
    """A command that cannot be carried out; its message is for the user."""


def load_settings(config: str | None) -> tuple[Settings, Path]:
    path_text = config or os.environ.get(CONFIG_ENV)
    if not path_text:
        raise CommandError(f"no configuration file: pass --config PATH or set {CONFIG_ENV}")
    path = Path(path_text)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(str(path), "", f"cannot read the file: {exc.strerror or exc}") from None
    return parse_settings(text, str(path), os.environ), path.resolve().parent


@contextmanager
def ledger_writer(settings: Settings, base_dir: Path) -> Iterator[object]:
    from app.ledger.writer import LedgerWriter
    from projections.event_store import open_ledger_store

    store = open_ledger_store(settings.database_url, base_dir)
    try:
        with LedgerWriter(store) as writer:
            yield writer
    finally:
        store.close()


def credits_amount(text: str) -> int:
    try:
        micros = micros_from_credits(text)
    except AmountError as exc:
        raise CommandError(f"invalid credit amount: {exc}") from None
    if micros < 0:
        raise CommandError(f"invalid credit amount: {text} is negative")
    return micros
