"""Receipts (the log key's signed statement of a charge and its leaf) and witnesses' cosignatures
(C2SP tlog-cosignature v1): each made, read back and verified offline; each changed byte refused."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.transparency.checkpoint import Checkpoint, parse_checkpoint, sign_checkpoint
from domain.transparency.cosignature import (
    Cosigner,
    add_cosignatures,
    cosignatures_of,
    cosigned_message,
    parse_cosigner,
    parse_cosigner_verifier,
)
from domain.transparency.hashing import leaf_hash, merkle_root
from domain.transparency.keys import InvalidSignature, KeyFormatError, UnverifiedNote, signer_from_seed
from domain.transparency.note import parse_note
from domain.transparency.receipt import MalformedReceipt, Receipt, parse_receipt, sign_receipt, verify_receipt
from domain.transparency.verify import ProofError
from tests.unit.domain.transparency.rfc6962_reference import Reference

LOG = signer_from_seed("tollgate.example/ledger", bytes(range(32)))
WITNESS = Cosigner("witness.example/w1", bytes(range(32, 64)))
ENTRIES = [f"event {i}".encode() for i in range(11)]
LEAVES = [leaf_hash(entry) for entry in ENTRIES]
REFERENCE = Reference(ENTRIES)  # RFC 6962 as the RFC writes it: independent of the log's code


def inclusion_proof(index: int, leaves: list[bytes]) -> list[bytes]:
    return REFERENCE.path(index, len(leaves))


def receipt_of(index: int) -> Receipt:
    return Receipt(LOG.name, f"req_{index}", "acme", index + 1, 1_234 + index, 98_766, index, LEAVES[index])


def checkpoint_of(size: int) -> bytes:
    return sign_checkpoint(Checkpoint(LOG.name, size, merkle_root(LEAVES[:size])), LOG)


@given(size=st.integers(1, len(LEAVES)), data=st.data())
def test_a_receipt_verifies_offline_with_a_later_checkpoint_and_its_inclusion_proof(size: int, data: st.DataObject):
    index = data.draw(st.integers(0, size - 1))
    header = sign_receipt(receipt_of(index), LOG)
    proof = inclusion_proof(index, LEAVES[:size])
    verified = verify_receipt(header, checkpoint_of(size), proof, LOG.verifier)
    assert verified.receipt == receipt_of(index)
    assert verified.checkpoint.size == size


def test_a_receipt_with_one_changed_digit_or_a_wrong_proof_does_not_verify():
    header = sign_receipt(receipt_of(3), LOG)
    note = base64.b64decode(header)
    changed = base64.b64encode(note.replace(b"cost 1237", b"cost 1238")).decode()
    proof = inclusion_proof(3, LEAVES[:8])
    with pytest.raises(InvalidSignature):
        verify_receipt(changed, checkpoint_of(8), proof, LOG.verifier)
    with pytest.raises(ProofError):
        verify_receipt(header, checkpoint_of(8), inclusion_proof(4, LEAVES[:8]), LOG.verifier)
    with pytest.raises(ProofError):  # a checkpoint from before the charge
        verify_receipt(header, checkpoint_of(3), [], LOG.verifier)
    impostor = signer_from_seed(LOG.name, bytes(32))
    with pytest.raises(UnverifiedNote):
        verify_receipt(sign_receipt(receipt_of(3), impostor), checkpoint_of(8), proof, LOG.verifier)


def test_a_receipt_is_never_read_as_a_checkpoint_nor_a_checkpoint_as_a_receipt():
    text = receipt_of(0).text
    with pytest.raises(ValueError, match="tree size"):
        parse_checkpoint(text)
    with pytest.raises(MalformedReceipt):
        parse_receipt(parse_note(checkpoint_of(4)).text)
    with pytest.raises(MalformedReceipt):
        Receipt("123", "req", "acme", 1, 1, 1, 0, LEAVES[0])  # an origin that could be a size


@pytest.mark.parametrize(
    "line",
    ["request\n", "team acme\nteam acme\n", "cost 1.5\n", "cost 01\n", "leaf_hash !!\n", "event \n"],
)
def test_a_receipt_text_that_is_not_exactly_the_format_is_refused(line: str):
    lines = receipt_of(0).text.splitlines(keepends=True)
    field = line.split(" ", maxsplit=1)[0].strip()
    at = next(i for i, existing in enumerate(lines) if existing.startswith(field + " "))
    lines[at] = line
    with pytest.raises(MalformedReceipt):
        parse_receipt("".join(lines))


def test_a_cosignature_is_c2sp_v1_and_verifies_with_the_witness_key_alone():
    checkpoint = checkpoint_of(7)
    text = parse_note(checkpoint).text
    line = WITNESS.cosign(text, 1_679_315_147)
    raw = line.signature
    assert len(raw) == 72  # u64 timestamp || Ed25519 signature
    assert int.from_bytes(raw[:8], "big") == 1_679_315_147
    assert cosigned_message(text, 1_679_315_147).startswith(b"cosignature/v1\ntime 1679315147\n" + text.encode())
    cosigned = add_cosignatures(checkpoint, [line, line])
    assert cosigned.count(b"\xe2\x80\x94 witness.example/w1 ") == 1  # one line, however often added
    (found,) = cosignatures_of(cosigned, [WITNESS.verifier])
    assert (found.name, found.timestamp) == ("witness.example/w1", 1_679_315_147)
    assert cosignatures_of(checkpoint, [WITNESS.verifier]) == []
    other = add_cosignatures(checkpoint_of(8), [])  # the same line under another checkpoint fails
    forged = other.replace(b"\n\n", b"\n\n" + line.line.encode(), 1)
    with pytest.raises(InvalidSignature):
        cosignatures_of(forged, [WITNESS.verifier])


def test_cosigner_keys_round_trip_and_cannot_pass_for_note_keys():
    assert parse_cosigner(WITNESS.key_string) == WITNESS
    assert parse_cosigner_verifier(WITNESS.verifier.key_string) == WITNESS.verifier
    from domain.transparency.keys import parse_signer_key, parse_verifier_key

    with pytest.raises(KeyFormatError):
        parse_verifier_key(WITNESS.verifier.key_string)  # type 0x04, not a note key's 0x01
    with pytest.raises(KeyFormatError):
        parse_signer_key(WITNESS.key_string)
    with pytest.raises(KeyFormatError):
        parse_cosigner_verifier(LOG.verifier.key_string)
