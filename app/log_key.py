"""The transparency log's signer key, read from where `[transparency]` says (a file or the
environment): ``tollgate serve`` checks it is there before serving, and the runtime signs the log's
checkpoints and the receipts of charges with it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from domain.settings import ConfigError
from domain.settings_log import Transparency
from domain.transparency.keys import KeyFormatError, NoteSigner, parse_signer_key


def _key_text(log: Transparency, base_dir: Path, environ: Mapping[str, str]) -> str:
    if log.key_file:
        path = Path(log.key_file)
        path = path if path.is_absolute() else base_dir / path
        return path.read_text().strip() if path.is_file() else ""
    return environ.get(log.key_env, "").strip()


def log_signer(
    log: Transparency | None, base_dir: Path, environ: Mapping[str, str], origin: str = ""
) -> NoteSigner | None:
    """The log's signer (None without a `[transparency]` table); ``ConfigError`` if the table asks
    for a key that is not there, or is not a signer key."""
    if log is None:
        return None
    where = f"transparency.key_file ({log.key_file})" if log.key_file else f"environment variable {log.key_env}"
    text = _key_text(log, base_dir, environ)
    if not text:
        raise ConfigError(origin, "transparency", f"no log signer key: {where} is not set (tollgate log keygen)")
    try:
        return parse_signer_key(text)
    except KeyFormatError as exc:
        raise ConfigError(origin, "transparency", f"{where} is not a log signer key: {exc}") from None
