"""``tollgate log keygen`` and ``tollgate log checkpoint``: the log's signer key, and its latest
checkpoint as the gateway serves it (``GET /ledger/checkpoint``), read from the ledger's database."""

from __future__ import annotations

import argparse
import secrets
from pathlib import Path
from typing import Any

from app.cli.support import CommandError
from app.settings_file import load_settings
from domain.transparency.keys import KeyFormatError, signer_from_seed


def cmd_keygen(args: argparse.Namespace) -> None:
    """A new signer key for the log named ``origin``: the secret key to the file (or standard output),
    its verifier key (to publish) to standard output."""
    try:
        signer = signer_from_seed(args.origin, secrets.token_bytes(32))
    except KeyFormatError as exc:
        raise CommandError(f"{args.origin!r}: {exc}") from None
    if args.out:
        path = Path(args.out)
        if path.exists():
            raise CommandError(f"{path} exists: a log key is never overwritten")
        path.touch(mode=0o600)
        path.write_text(signer.key_string + "\n")
        print(f"signer key written to {path} (keep it secret: [transparency] key_file = {str(path)!r})")
    else:
        print(signer.key_string)
    print(signer.verifier.key_string)


def cmd_checkpoint(args: argparse.Namespace) -> int:
    from app.store.database import Database, Sql
    from app.store.log_reads import LogReads

    settings, base = load_settings(args.config)
    sql = Sql(Database.from_url(settings.database_url, base))
    try:
        reads = LogReads(sql)
        kept = reads.latest_checkpoint()
        if kept is None:
            print(f"no checkpoint signed yet (the log has {reads.head().size} leaves)")
            return 1
        print(kept.note + "".join(reads.cosignatures(kept.size)), end="")
    finally:
        sql.close()
    return 0


def add_log_commands(log: Any, common: argparse.ArgumentParser) -> None:
    keygen = log.add_parser("keygen", help="a new signer key for the log (its name is the log's origin)")
    keygen.add_argument("origin", help="the log's origin, e.g. gateway.example.com/ledger")
    keygen.add_argument("--out", help="write the secret key to this file (mode 600) instead of printing it")
    keygen.set_defaults(func=cmd_keygen)
    checkpoint = log.add_parser("checkpoint", parents=[common], help="the latest signed checkpoint of the log")
    checkpoint.set_defaults(func=cmd_checkpoint)
