"""What every ``tollgate`` command shares: opening the ledger, reading amounts, naming who acts.

The configuration file is found and read by ``app/settings_file.py`` (the serving workers read it
too)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from app.settings_file import load_settings
from domain.money import AmountError, micros_from_credits
from domain.settings import Settings

if TYPE_CHECKING:  # imported when a command opens the ledger: ``tollgate --help`` stays quick
    from app.ledger.service import LedgerService
    from app.paging import OutOfBounds
    from app.store.event_store import LedgerStore

#: The longest reason, reference or key name a command records (the admin API's bound).
MAX_RECORDED_TEXT = 500


class CommandError(Exception):
    """A command that cannot be carried out; its message is for the user."""


@contextmanager
def ledger_service(settings: Settings, base_dir: Path) -> Iterator[LedgerService]:
    """The ledger's commands, through a writer of this process's own, stopped (every command
    committed) and the store closed when the block ends. One command at a time needs two
    connections, not a gateway's pool: a pool opens its connections as it starts, and every one
    is a PostgreSQL server process."""
    from app.ledger.service import LedgerService
    from app.ledger.writer import LedgerWriter
    from app.store.event_store import open_ledger_store

    store = open_ledger_store(settings.database_url, base_dir, pool_size=2)
    try:
        with LedgerWriter(store) as writer:
            yield LedgerService(writer)
    finally:
        store.close()


@contextmanager
def ledger_store(config: str | None) -> Iterator[LedgerStore]:
    """The ledger's store alone, for commands that only read (two connections at most)."""
    from app.store.event_store import open_ledger_store

    settings, base = load_settings(config)
    store = open_ledger_store(settings.database_url, base, pool_size=2)
    try:
        yield store
    finally:
        store.close()


def out_of_bounds(exc: OutOfBounds) -> CommandError:
    """A page, page size or time out of the bounds the admin API sets (``app/paging.py``), in the
    same words, naming the option that gave it (``--per-page`` where the API says ``'per_page'``)."""
    return CommandError(exc.said("--" + exc.parameter.replace("_", "-")))


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


def recorded_text(value: str) -> str:
    """An option's text that the ledger records (a reason, a reference, a key's name), by the rule
    every recorded text follows (``domain/client_text.py``; an argument that is not UTF-8 reaches
    Python as lone surrogates, which the rule refuses too)."""
    from domain.client_text import ClientTextError, checked_text

    try:
        return checked_text(value, "the text", MAX_RECORDED_TEXT)
    except ClientTextError as exc:
        raise argparse.ArgumentTypeError(exc.problem) from None


def add_reason_option(parser: argparse.ArgumentParser, required: bool = False) -> None:
    """``--reason``: why, kept in the ledger with who did it (the audit history shows both)."""
    parser.add_argument(
        "--reason", required=required, default="", type=recorded_text, help="why; kept in the ledger with who did it"
    )
