"""``tollgate log audit``, ``tollgate log witness`` and ``tollgate log witness-keygen``: watching a
gateway's transparency log from outside, trusting only its public key (``app/log_audit.py``).

- ``audit --url URL --key VKEY [--state FILE] [--receipts FILE] [--sample N]``: every checkpoint the
  gateway kept since the one saved in ``--state`` must be consistent with the one before it (the
  first that is not is named, exit 1, and the saved one kept); then up to N of the caller's own
  receipts (one ``x-tollgate-receipt`` value per line) must be proven in the latest checkpoint.
- ``witness --url URL --log-key VKEY --key FILE [--state FILE]``: cosign the latest checkpoint once
  it is proven to extend the last one this witness cosigned, and hand the cosignature to the gateway.
- ``witness-keygen NAME``: a witness key (``PRIVATE+KEY+…``, to keep secret) and its verifier key
  (to give the gateway's operator and the auditors who trust it).
"""

from __future__ import annotations

import argparse
import secrets
from pathlib import Path
from typing import Any

from app.cli.log_offline import file_or_value, log_key
from app.cli.support import CommandError
from app.log_audit import AuditFailed, LogClient, SavedCheckpoint, audit, witness
from domain.transparency.cosignature import Cosigner, parse_cosigner
from domain.transparency.keys import KeyFormatError


def cmd_audit(args: argparse.Namespace) -> int:
    client = LogClient(args.url, log_key(args.key))
    receipts: list[str] = []
    if args.receipts:
        try:
            receipts = Path(args.receipts).read_text().splitlines()
        except OSError as exc:
            raise CommandError(f"--receipts: cannot read {args.receipts}: {exc.strerror}") from None
    try:
        finding = audit(client, SavedCheckpoint(Path(args.state)), receipts, args.sample)
    except AuditFailed as exc:
        print(f"AUDIT FAILED: {exc}")
        return 1
    finally:
        client.close()
    latest = finding.accepted[-1]
    print(
        f"{len(finding.accepted)} checkpoint(s) consistent, up to {latest.size} leaves; "
        f"{finding.receipts_proved} receipt(s) proven, {finding.receipts_pending} newer than the checkpoint"
    )
    for failure in finding.failures:
        print(f"AUDIT FAILED: {failure}")
    return 1 if finding.failures else 0


def cmd_witness(args: argparse.Namespace) -> int:
    try:
        cosigner = parse_cosigner(file_or_value(args.key))
    except KeyFormatError as exc:
        raise CommandError(f"--key: not a witness key ({exc})") from None
    client = LogClient(args.url, log_key(args.log_key))
    try:
        cosigned = witness(client, SavedCheckpoint(Path(args.state)), cosigner)
    except AuditFailed as exc:
        print(f"NOT COSIGNED: {exc}")
        return 1
    finally:
        client.close()
    print(f"cosigned {cosigned.origin} at {cosigned.size} leaves as {cosigner.name}")
    return 0


def cmd_witness_keygen(args: argparse.Namespace) -> None:
    try:
        cosigner = Cosigner(args.name, secrets.token_bytes(32))
    except KeyFormatError as exc:
        raise CommandError(str(exc)) from None
    print(cosigner.key_string)
    print(cosigner.verifier.key_string)


def add_watch_commands(log: Any) -> None:
    """The auditor's and the witness's commands, under ``tollgate log``."""
    auditing = log.add_parser("audit", help="check a gateway's checkpoints stay consistent, and your receipts")
    auditing.add_argument("--url", required=True, help="the gateway, e.g. https://gateway.example.com")
    auditing.add_argument("--key", required=True, help="the log's verifier key, or a file holding it")
    auditing.add_argument("--state", default="tollgate-audit.json", help="where the last checkpoint seen is kept")
    auditing.add_argument("--receipts", help="a file of your x-tollgate-receipt values, one per line")
    auditing.add_argument("--sample", type=int, default=20, help="how many receipts to prove (default 20)")
    auditing.set_defaults(func=cmd_audit)
    witnessing = log.add_parser("witness", help="cosign a gateway's latest checkpoint once it is proven consistent")
    witnessing.add_argument("--url", required=True, help="the gateway")
    witnessing.add_argument("--log-key", required=True, help="the log's verifier key, or a file holding it")
    witnessing.add_argument("--key", required=True, help="the witness's private key, or a file holding it")
    witnessing.add_argument(
        "--state", default="tollgate-witness.json", help="where the last checkpoint cosigned is kept"
    )
    witnessing.set_defaults(func=cmd_witness)
    keygen = log.add_parser("witness-keygen", help="a witness key (secret) and its verifier key")
    keygen.add_argument("name", help="the witness's name, e.g. witness.example.com/w1")
    keygen.set_defaults(func=cmd_witness_keygen)
