"""The configuration file: which one (``--config``, else ``TOLLGATE_CONFIG``), read and validated.

Every ``tollgate`` command reads it, and so does each worker process of ``tollgate serve --workers
N``, which finds it in ``TOLLGATE_CONFIG`` (set by the process that started it). So it is read here,
outside the CLI and the HTTP application, which both import it. The validation is the domain's
(``domain/settings.py``), done on the file's text.
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


def load_settings(config: str | None) -> tuple[Settings, Path]:
    """The settings of the file ``config`` names (else ``TOLLGATE_CONFIG``'s), and the folder it is
    in, which relative paths in it (an SQLite ledger's) are relative to. Raises :class:`ConfigError`
    naming the file when it cannot be read or used."""
    path_text = config or os.environ.get(CONFIG_ENV)
    if not path_text:
        raise NoConfigFile
    path = Path(path_text)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(str(path), "", f"cannot read the file: {exc.strerror or exc}") from None
    return parse_settings(text, str(path), os.environ), path.resolve().parent
