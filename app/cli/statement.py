"""``tollgate ledger statement``: a team's monthly statement; ``tollgate ledger verify --statement FILE``.

The statement is built from the team's events (``projections/statements.py``) and written by
``app/ledger/statements.py``, as the admin API and the dashboard write it. It states whether it
reconciles; one that does not is still written, says what differs, and the command exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.support import CommandError, ledger_store
from app.settings_file import CONFIG_ENV, NotText, UnreadableFile, read_text_file
from domain.money import format_credits

if TYPE_CHECKING:  # imported when the command runs: ``tollgate --help`` stays quick
    from domain.transparency.keys import NoteVerifier
    from projections.statements import Month


def _month(text: str) -> Month:
    from projections.statements import Month

    try:
        return Month.parse(text)
    except ValueError as exc:
        raise CommandError(f"invalid --month: {exc}") from None


def cmd_ledger_statement(args: argparse.Namespace) -> int:
    from app.ledger.statements import statement_chunks
    from projections.statements import Statement

    month = _month(args.month or datetime.now(UTC).strftime("%Y-%m"))
    output = Path(args.output) if args.output else None
    with ledger_store(args.config) as store:
        statement = Statement(store, args.team, month)
        chunks = statement_chunks(statement, args.format, args.chained)
        if output is None:
            sys.stdout.writelines(chunks)
        else:
            _write_file(output, chunks)
    figures = statement.figures
    if output is not None:
        print(
            f"Wrote the statement of team {args.team} for {month.text} to {output}: opening "
            f"{format_credits(figures.opening)}, closing {format_credits(figures.closing)} credits; "
            f"{'reconciled' if figures.reconciled else 'NOT reconciled'}."
        )
    if not figures.reconciled:
        print(f"tollgate: the statement does not reconcile: {'; '.join(figures.problems)}", file=sys.stderr)
        return 1
    return 0


def _write_file(output: Path, chunks: Iterator[str]) -> None:
    """The statement written beside ``output`` and moved over it once whole: a statement cut short
    (the ledger gone meanwhile) never stands in its place."""
    try:
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", newline="", dir=output.parent or ".", prefix=f".{output.name}.", delete=False
        ) as out:
            try:
                out.writelines(chunks)
            except BaseException:
                out.close()
                Path(out.name).unlink()
                raise
        Path(out.name).replace(output)
    except OSError as exc:
        raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from None


#: ``ledger verify --statement FILE``'s exit codes (docs/billing.md, "Monthly statements").
VERIFIED, FAILED, CHAIN_ONLY = 0, 1, 3


def cmd_verify_statement(args: argparse.Namespace) -> int:
    """Check a chained statement file's hash chain and, when the ledger is reachable through the
    configuration, that it is the statement the ledger gives. Exit 0 only for the latter: a chain
    alone is consistent with itself whoever recomputed it, so that is exit 3, said as such."""
    from app.ledger.statements import verify_statement

    path = Path(args.statement)
    try:
        text = read_text_file(path)
    except NotText as exc:  # a file, and not a statement (1); a file that cannot be read is a usage error (2)
        print(
            f"Statement verification FAILED for {path}: {exc}, so it is not a statement Tollgate writes",
            file=sys.stderr,
        )
        return FAILED
    except UnreadableFile as exc:
        raise CommandError(f"cannot read {path}: {exc}") from None
    trusted = _read_checkpoint(args.checkpoint) if args.checkpoint else None
    if args.config or os.environ.get(CONFIG_ENV):
        key = _log_key(args)
        with ledger_store(args.config) as store:
            check = verify_statement(text, store, log_key=key, trusted=trusted)
    else:
        if args.checkpoint:
            raise CommandError("--checkpoint needs the ledger: pass --config (or set TOLLGATE_CONFIG)")
        check = verify_statement(text, None)
    found = check.file
    if not check.ok:
        print(f"Statement verification FAILED for {path}: {check.problem}", file=sys.stderr)
        return FAILED
    what = f"team {found.team}, {found.month}, {len(found.rows)} rows ({found.fmt.upper()})"
    if not check.against_ledger:
        print(
            f"Statement NOT verified: only its hash chain was checked ({what}): every row's prev_hash is the hash "
            f"of the row before it; final hash {found.final_hash}.\n"
            f"A chain is consistent with itself whoever recomputed it: compare the statement with the ledger by "
            f"passing --config (or setting {CONFIG_ENV}). Exit code {CHAIN_ONLY}: chain consistent, not checked "
            "against a ledger."
        )
        return CHAIN_ONLY
    print(
        f"Statement verified: {what}; every row's prev_hash is the hash of the row before it; final hash "
        f"{found.final_hash}."
    )
    print(
        f"It is the statement the ledger gives: regenerated from the team's events up to version "
        f"{check.ledger_version}, row for row, with the same final hash."
    )
    if check.month_over:
        print(f"{found.month} is over, and the statement reaches its last event.")
    else:
        print(
            f"{found.month} goes on: the statement is the month so far, up to version {check.ledger_version} "
            "(once the month is over, only its whole statement verifies)."
        )
    proof = check.proof
    if proof is not None:
        print(
            f"Its {proof.rows_proven} entries, and its last event, are in the transparency log: each event as the "
            f"ledger holds it is the leaf the statement names in the tree of checkpoint {proof.checkpoint_size}, "
            "signed by the log's key."
        )
        if proof.trusted_size is not None:
            print(f"That checkpoint is consistent with yours ({proof.trusted_size} leaves): one log, only appended to.")
    else:
        print(f"Its rows were NOT proven in the transparency log: {check.unproven}.")
    return VERIFIED


def _read_checkpoint(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CommandError(f"--checkpoint: cannot read {path}: {exc.strerror or exc}") from None


def _log_key(args: argparse.Namespace) -> NoteVerifier | None:
    """The log key the statement's checkpoint must be signed with: ``--key``, else the configured log's."""
    from app.cli.log_offline import log_key
    from app.log_key import log_signer
    from app.settings_file import load_settings
    from domain.settings import ConfigError

    if args.key:
        return log_key(args.key)
    settings, base = load_settings(args.config)
    try:
        signer = log_signer(settings.transparency, base, os.environ)
    except ConfigError:
        return None
    return None if signer is None else signer.verifier


def add_statement_commands(ledger: Any, common: argparse.ArgumentParser, verify: argparse.ArgumentParser) -> None:
    """``ledger statement``, and ``--statement FILE`` on ``ledger verify`` (which then checks the file)."""
    statement = ledger.add_parser(
        "statement",
        parents=[common],
        help="a team's statement for a UTC calendar month, reconciled with the replayed "
        "ledger (JSON or CSV; --chained: tamper-evident)",
    )
    statement.add_argument("--team", required=True)
    statement.add_argument("--month", help="YYYY-MM (UTC); default: the current month")
    statement.add_argument("--format", choices=("json", "csv"), default="json")
    statement.add_argument(
        "--chained",
        action="store_true",
        help="every row carries the hash of the row before it; the statement ends with the "
        "final hash (tollgate ledger verify --statement FILE checks it)",
    )
    statement.add_argument("--output", help="write it to this file (default: standard output)")
    statement.set_defaults(func=cmd_ledger_statement)

    verify.add_argument(
        "--statement",
        metavar="FILE",
        help="check this chained statement instead of the ledger: its hash chain and, with a "
        "configuration, that the ledger gives the same statement (exit 0: it does; 1: it "
        "does not, or the file is not a statement; 3: the chain holds but no ledger was "
        "compared, without a configuration)",
    )
    verify.add_argument(
        "--key",
        metavar="KEY",
        help="with --statement: the transparency log's verifier key (or a file holding it) its checkpoint "
        "must be signed with (default: the configured log's own)",
    )
    verify.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="with --statement: a checkpoint of the log you kept (an auditor's, a witness's); the "
        "statement's checkpoint must be consistent with it",
    )
    whole: Callable[[argparse.Namespace], int] = verify.get_default("func")
    verify.set_defaults(func=lambda args: cmd_verify_statement(args) if args.statement else whole(args))
