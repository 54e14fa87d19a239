"""The offline verifier, as a customer runs it: ``tollgate log verify-receipt`` and ``verify-consistency``
on files alone (no configuration, no database), trusting only the log's public key. The log here is
built by the tests' own RFC 6962 implementation, so the command is checked against it."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from domain.transparency.checkpoint import Checkpoint, sign_checkpoint
from domain.transparency.hashing import leaf_hash
from domain.transparency.keys import signer_from_seed
from domain.transparency.receipt import Receipt, sign_receipt
from tests.support.cli_fork import run_tollgate
from tests.unit.domain.transparency.rfc6962_reference import Reference

LOG = signer_from_seed("tollgate.example/ledger", bytes(range(32)))
ENTRIES = [f"charge {i}".encode() for i in range(20)]
REFERENCE = Reference(ENTRIES)


def tollgate(*args: str) -> tuple[int, str]:
    result = run_tollgate(list(args), dict(os.environ), timeout=60)
    return result.returncode, result.stdout + result.stderr


def checkpoint(directory: Path, size: int, name: str, signer=LOG) -> Path:
    path = directory / name
    path.write_bytes(sign_checkpoint(Checkpoint(LOG.name, size, REFERENCE.root(size)), signer))
    return path


def proof_file(directory: Path, name: str, hashes: list[bytes], as_json: bool = True) -> Path:
    path = directory / name
    encoded = [base64.b64encode(h).decode() for h in hashes]
    path.write_text(json.dumps({"proof": encoded}) if as_json else "\n".join(encoded) + "\n")
    return path


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "log.vkey"
    path.write_text(LOG.verifier.key_string + "\n")
    return path


def test_a_receipt_verifies_with_a_later_checkpoint_and_a_changed_digit_does_not(tmp_path: Path, key_file: Path):
    receipt = Receipt(LOG.name, "req_7", "acme", 8, 1_500, 98_500, 7, leaf_hash(ENTRIES[7]))
    header = sign_receipt(receipt, LOG)
    (tmp_path / "receipt").write_text(header)
    later = checkpoint(tmp_path, 15, "cp15")
    proof = proof_file(tmp_path, "proof.json", REFERENCE.path(7, 15))
    code, out = tollgate("log", "verify-receipt", str(tmp_path / "receipt"), "--checkpoint", str(later),
                         "--proof", str(proof), "--key", str(key_file))  # fmt: skip
    assert code == 0, out
    assert "request req_7 of team acme charged 1500 micro-credits" in out
    assert "leaf 7 of tollgate.example/ledger, included in the checkpoint of 15 leaves" in out
    changed = base64.b64encode(base64.b64decode(header).replace(b"cost 1500", b"cost 1509")).decode()
    code, out = tollgate("log", "verify-receipt", changed, "--checkpoint", str(later), "--proof", str(proof),
                         "--key", LOG.verifier.key_string)  # fmt: skip
    assert code == 1
    assert "NOT VERIFIED: InvalidSignature" in out
    wrong = proof_file(tmp_path, "wrong.txt", REFERENCE.path(8, 15), as_json=False)
    code, out = tollgate("log", "verify-receipt", header, "--checkpoint", str(later), "--proof", str(wrong),
                         "--key", str(key_file))  # fmt: skip
    assert code == 1
    assert "NOT VERIFIED: ProofError" in out


def test_consistency_between_checkpoints_and_a_log_rewritten_or_signed_by_another_key(tmp_path: Path, key_file: Path):
    old, new = checkpoint(tmp_path, 6, "cp6"), checkpoint(tmp_path, 19, "cp19")
    proof = proof_file(tmp_path, "c.json", REFERENCE.proof(6, 19))
    code, out = tollgate("log", "verify-consistency", str(old), str(new), "--proof", str(proof), "--key", str(key_file))
    assert code == 0, out
    assert "at 19 leaves extends its tree of 6 leaves" in out
    rewritten = Reference([b"rewritten " + e if i == 3 else e for i, e in enumerate(ENTRIES)])
    forged = tmp_path / "forged19"
    forged.write_bytes(sign_checkpoint(Checkpoint(LOG.name, 19, rewritten.root(19)), LOG))
    forged_proof = proof_file(tmp_path, "f.json", rewritten.proof(6, 19))
    code, out = tollgate("log", "verify-consistency", str(old), str(forged), "--proof", str(forged_proof),
                         "--key", str(key_file))  # fmt: skip
    assert code == 1
    assert "ProofError" in out
    impostor = checkpoint(tmp_path, 19, "impostor19", signer=signer_from_seed(LOG.name, bytes(32)))
    code, out = tollgate("log", "verify-consistency", str(old), str(impostor), "--proof", str(proof),
                         "--key", str(key_file))  # fmt: skip
    assert code == 1
    assert "UnverifiedNote" in out


def test_what_is_not_a_key_a_proof_or_a_file_is_said_plainly(tmp_path: Path, key_file: Path):
    cp = checkpoint(tmp_path, 4, "cp4")
    (tmp_path / "junk").write_text("{not json")
    for args, said in (
        (["--key", "not-a-key"], "not a log verifier key"),
        (["--key", str(key_file), "--proof", str(tmp_path / "junk")], "is not the proof endpoints' JSON"),
        (["--key", str(key_file), "--proof", str(tmp_path / "missing")], "cannot read"),
    ):
        full = [
            "log",
            "verify-consistency",
            str(cp),
            str(cp),
            *(["--proof", str(cp)] if "--proof" not in args else []),
            *args,
        ]
        code, out = tollgate(*full)
        assert code != 0
        assert said in out, out
