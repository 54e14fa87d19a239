"""The configuration file: which one (``--config``, else ``TOLLGATE_CONFIG``), read and validated.

Every ``tollgate`` command reads it, and so does each worker process of ``tollgate serve --workers
N``, which finds it in ``TOLLGATE_CONFIG`` (set by the process that started it). So it is read here,
outside the CLI and the HTTP application, which both import it. The validation is the domain's
(``domain/settings.py``), done on the file's text. Every other file an operator hands a command (a
price list, a statement) is read as text the same way: :func:`read_text_file`.
"""

from __future__ import annotations

import os
from pathlib import Path

from domain.settings import ConfigError, Settings, parse_settings

CONFIG_ENV = "TOLLGATE_CONFIG"


class NoConfigFile(ConfigError):
    """No configuration file was named, neither by ``--config`` nor by ``TOLLGATE_CONFIG``."""

    def __init__(self) -> None:
        super().__init__("no configuration file", "", f"pass --config PATH or set {CONFIG_ENV}")


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
        raise NotText(
            f"it is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start} is not valid there)"
        ) from None


def load_settings(config: str | None) -> tuple[Settings, Path]:
    """The settings of the file ``config`` names (else ``TOLLGATE_CONFIG``'s), and the folder it is
    in, which relative paths in it (an SQLite ledger's) are relative to. Raises :class:`ConfigError`
    naming the file when it cannot be read or used."""
    path_text = config or os.environ.get(CONFIG_ENV)
    if not path_text:
        raise NoConfigFile
    path = Path(path_text)
    try:
        text = read_text_file(path)
    except UnreadableFile as exc:
        raise ConfigError(str(path), "", f"cannot read the file: {exc}") from None
    return parse_settings(text, str(path), os.environ), path.resolve().parent
