"""What every ``tollgate`` command shares: finding the config, opening the ledger, reading amounts."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from domain.money import AmountError, micros_from_credits
from domain.settings import ConfigError, Settings, parse_settings

if TYPE_CHECKING:  # imported when a command opens the ledger: ``tollgate --help`` stays quick
    from app.ledger.service import LedgerService
    from projections.event_store import LedgerStore

CONFIG_ENV = "TOLLGATE_CONFIG"


class CommandError(Exception):
    """A command that cannot be carried out; its message is for the user."""


class UnreadableFile(ValueError):
    """A file a command was given that cannot be read as text; the message says why, for the user."""


class NotText(UnreadableFile):
    """A file that was read, and whose bytes are not UTF-8 text."""


def read_text_file(path: Path) -> str:
    """A file an operator hands a command (a configuration, a price list, a statement), as UTF-8 text:
    the encoding Tollgate writes and documents, whatever the machine's locale. A file that cannot be
    read is :class:`UnreadableFile`, one whose bytes are not UTF-8 :class:`NotText`, each saying why —
    never a traceback."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UnreadableFile(exc.strerror or str(exc)) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotText(f"it is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start} is not "
                             "valid there)") from None


def load_settings(config: str | None) -> tuple[Settings, Path]:
    path_text = config or os.environ.get(CONFIG_ENV)
    if not path_text:
        raise CommandError(f"no configuration file: pass --config PATH or set {CONFIG_ENV}")
    path = Path(path_text)
    try:
        text = read_text_file(path)
    except UnreadableFile as exc:
        raise ConfigError(str(path), "", f"cannot read the file: {exc}") from None
    return parse_settings(text, str(path), os.environ), path.resolve().parent


@contextmanager
def ledger_service(settings: Settings, base_dir: Path) -> Iterator[LedgerService]:
    """The ledger's commands, through a writer of this process's own, stopped (every command
    committed) and the store closed when the block ends."""
    from app.ledger.service import LedgerService
    from app.ledger.writer import LedgerWriter
    from projections.event_store import open_ledger_store

    store = open_ledger_store(settings.database_url, base_dir)
    try:
        with LedgerWriter(store) as writer:
            yield LedgerService(writer)
    finally:
        store.close()


@contextmanager
def ledger_store(config: str | None) -> Iterator[LedgerStore]:
    """The ledger's store alone, for commands that only read (two connections at most)."""
    from projections.event_store import open_ledger_store

    settings, base = load_settings(config)
    store = open_ledger_store(settings.database_url, base, pool_size=2)
    try:
        yield store
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


def cli_actor() -> str:
    """Who the events a command records name as having caused them: ``cli:USER@HOST``, the account
    that ran it and the machine it ran on (``admin:<key id>`` is the admin API's counterpart)."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name in the environment nor the password database
        user = f"uid{os.getuid()}"
    return f"cli:{user}@{socket.gethostname()}"


def add_reason_option(parser: argparse.ArgumentParser, required: bool = False) -> None:
    """``--reason``: why, kept in the ledger with who did it (the audit history shows both)."""
    parser.add_argument("--reason", required=required, default="", help="why; kept in the ledger with who did it")
