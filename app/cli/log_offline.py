"""``tollgate log verify-receipt`` and ``tollgate log verify-consistency``: the offline verifier.

Neither reads a configuration or a database: what they check comes in files, and the only trust
is the log's public key (``--key``, its verifier key string, as ``tollgate log keygen`` prints it and
``GET /ledger/key`` serves it). The checks are ``domain/transparency``'s (``receipt.py``,
``checkpoint.py``, ``verify.py``), which need nothing of the gateway either.

- ``verify-receipt RECEIPT --checkpoint C --proof P``: the receipt (a file holding the
  ``x-tollgate-receipt`` value, or the value itself) is the log key's, the checkpoint (a signed
  note) the same log's, and the inclusion proof leads from the receipt's leaf to its root.
- ``verify-consistency OLD NEW --proof P``: both checkpoints are the log key's, and the proof shows
  the newer tree extends the older one.

A proof file is what the proof endpoints answer (JSON with a ``proof`` list of base64 hashes) or one
base64 hash per line. Exit 0 when it verifies, 1 when it does not (saying why).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from app.cli.support import CommandError
from domain.transparency.checkpoint import MalformedCheckpoint, open_checkpoint
from domain.transparency.keys import InvalidSignature, KeyFormatError, NoteVerifier, UnverifiedNote, parse_verifier_key
from domain.transparency.note import MalformedNote, decode_base64
from domain.transparency.receipt import MalformedReceipt, verify_receipt
from domain.transparency.verify import ProofError, verify_consistency

#: What a verification that fails raises: each names what did not hold.
NOT_VERIFIED = (MalformedReceipt, MalformedCheckpoint, MalformedNote, InvalidSignature, UnverifiedNote, ProofError)


def file_or_value(text: str) -> str:
    """What a file named ``text`` holds, or ``text`` itself when no such file is there (a key or a
    receipt may be given either way; a long value is not a file name)."""
    try:
        path = Path(text)
        if path.is_file():
            return path.read_text().strip()
    except OSError:
        pass
    return text.strip()


def log_key(text: str) -> NoteVerifier:
    """The log's verifier key: the key string, or a file holding it."""
    value = file_or_value(text)
    try:
        return parse_verifier_key(value)
    except KeyFormatError as exc:
        raise CommandError(f"--key: not a log verifier key ({exc})") from None


def _read(path_or_value: str, what: str) -> bytes:
    path = Path(path_or_value)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CommandError(f"{what}: cannot read {path_or_value}: {exc.strerror}") from None


def read_proof(path: str) -> list[bytes]:
    """A proof file: the endpoints' JSON (``{"proof": [...]}``), or one base64 hash per line."""
    raw = _read(path, "--proof").decode("utf-8", errors="replace").strip()
    hashes: Any
    if raw.startswith("{"):
        try:
            hashes = json.loads(raw).get("proof")
        except (json.JSONDecodeError, AttributeError):
            raise CommandError(f"--proof: {path} is not the proof endpoints' JSON") from None
        if not isinstance(hashes, list) or not all(isinstance(h, str) for h in hashes):
            raise CommandError(f"--proof: {path} has no list of base64 hashes under 'proof'")
    else:
        hashes = [line.strip() for line in raw.splitlines() if line.strip()]
    try:
        return [decode_base64(h) for h in hashes]
    except MalformedNote:
        raise CommandError(f"--proof: {path} holds something that is not a base64 hash") from None


def cmd_verify_receipt(args: argparse.Namespace) -> int:
    key = log_key(args.key)
    header = file_or_value(args.receipt)
    try:
        verified = verify_receipt(header, _read(args.checkpoint, "--checkpoint"), read_proof(args.proof), key)
    except NOT_VERIFIED as exc:
        print(f"NOT VERIFIED: {type(exc).__name__}: {exc}")
        return 1
    receipt, checkpoint = verified.receipt, verified.checkpoint
    print(
        f"verified: request {receipt.request_id} of team {receipt.team} charged {receipt.cost} micro-credits "
        f"(balance after {receipt.balance_after}); its event {receipt.event_version} is leaf "
        f"{receipt.leaf_index} of {checkpoint.origin}, included in the checkpoint of {checkpoint.size} leaves"
    )
    return 0


def cmd_verify_consistency(args: argparse.Namespace) -> int:
    key = log_key(args.key)
    try:
        old = open_checkpoint(_read(args.old, "OLD"), key.name, [key])
        new = open_checkpoint(_read(args.new, "NEW"), key.name, [key])
        verify_consistency(old.size, new.size, old.root_hash, new.root_hash, read_proof(args.proof))
    except NOT_VERIFIED as exc:
        print(f"NOT VERIFIED: {type(exc).__name__}: {exc}")
        return 1
    print(f"verified: {key.name} at {new.size} leaves extends its tree of {old.size} leaves")
    return 0


def add_offline_commands(log: Any) -> None:
    """The verifier's commands, under ``tollgate log``."""
    receipt = log.add_parser(
        "verify-receipt", help="check a charge's receipt against a checkpoint and an inclusion proof (no database)"
    )
    receipt.add_argument("receipt", help="a file holding the x-tollgate-receipt value, or the value")
    receipt.add_argument("--checkpoint", required=True, help="a signed checkpoint (GET /ledger/checkpoint)")
    receipt.add_argument("--proof", required=True, help="its inclusion proof (GET /ledger/proof/inclusion)")
    receipt.add_argument("--key", required=True, help="the log's verifier key, or a file holding it")
    receipt.set_defaults(func=cmd_verify_receipt)
    consistency = log.add_parser(
        "verify-consistency", help="check that a newer checkpoint extends an older one (no database)"
    )
    consistency.add_argument("old", help="the older signed checkpoint")
    consistency.add_argument("new", help="the newer signed checkpoint")
    consistency.add_argument("--proof", required=True, help="the consistency proof (GET /ledger/proof/consistency)")
    consistency.add_argument("--key", required=True, help="the log's verifier key, or a file holding it")
    consistency.set_defaults(func=cmd_verify_consistency)
