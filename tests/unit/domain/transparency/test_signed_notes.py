"""C2SP signed notes and Ed25519 note keys, against golang.org/x/mod/sumdb/note's own test vectors:
the same key strings parse, the same text signs to the same bytes, and what its tests refuse is
refused here."""

from __future__ import annotations

import pytest

from domain.transparency.keys import (
    AmbiguousKey,
    InvalidSignature,
    KeyFormatError,
    NoteSigner,
    UnverifiedNote,
    key_id,
    open_note,
    parse_signer_key,
    parse_verifier_key,
    sign_note,
    signer_from_seed,
)
from domain.transparency.note import MAX_SIGNATURES, MalformedNote, Note, NoteSignature, format_note, parse_note

PETER_SIGNER = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
ENOCH = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
PETER_SIG = (
    "\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)
ENOCH_SIG = (
    "\u2014 EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n"
)


def test_the_reference_key_strings_parse_and_spell_back():
    verifier = parse_verifier_key(PETER)
    assert (verifier.name, verifier.key_id, verifier.key_string) == ("PeterNeumann", 0xC74F20A3, PETER)
    signer = parse_signer_key(PETER_SIGNER)
    assert signer.key_string == PETER_SIGNER
    assert signer.verifier == verifier
    assert key_id("PeterNeumann", verifier.public_key) == 0xC74F20A3
    assert "seed" not in repr(signer)
    assert "AYEKF" not in repr(signer)


def test_signing_gives_the_reference_signature_byte_for_byte():
    signed = sign_note(TEXT, [parse_signer_key(PETER_SIGNER)])
    assert signed.decode("utf-8") == TEXT + "\n" + PETER_SIG


def _every_mangling(key: str) -> list[str]:
    """note_test.go's manglings: every proper substring, and every byte one higher."""
    raw = key.encode()
    out = {raw[i:j].decode("utf-8", "replace") for i in range(len(raw) + 1) for j in range(i + 1, len(raw) + 1)}
    out.discard(key)
    for i in range(len(raw)):
        out.add((raw[:i] + bytes([raw[i] + 1]) + raw[i + 1 :]).decode("utf-8", "replace"))
    return sorted(out)


@pytest.mark.parametrize(("key", "parse"), [(PETER, parse_verifier_key), (PETER_SIGNER, parse_signer_key)])
def test_every_mangled_key_string_is_refused(key, parse):
    for mangled in _every_mangling(key):
        with pytest.raises(KeyFormatError):
            parse(mangled)


@pytest.mark.parametrize(
    "key",
    [
        "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",  # wrong length, its own ID
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # unknown algorithm, its own ID
        "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # the ID in upper case
        "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
    ],
)
def test_keys_of_another_shape_are_refused(key):
    with pytest.raises(KeyFormatError):
        parse_verifier_key(key)


def test_a_note_signed_by_two_keys_opens_with_either():
    message = (TEXT + "\n" + PETER_SIG + ENOCH_SIG).encode()
    peter, enoch = parse_verifier_key(PETER), parse_verifier_key(ENOCH)
    opened = open_note(message, [peter])
    assert opened.text == TEXT
    assert [(s.name, s.key_id) for s in opened.verified] == [("PeterNeumann", 0xC74F20A3)]
    assert [(s.name, s.key_id) for s in opened.unverified] == [("EnochRoot", 0xAF0CFE78)]
    both = open_note(message, [peter, enoch])
    assert [s.name for s in both.verified] == ["PeterNeumann", "EnochRoot"]
    assert not both.unverified
    with pytest.raises(UnverifiedNote):
        open_note(message, [])


def test_duplicated_signatures_count_once_and_a_bad_unknown_one_is_set_aside():
    enoch_abcd = ENOCH_SIG[:60] + "ABCD" + ENOCH_SIG[60:]
    message = (TEXT + "\n" + PETER_SIG + PETER_SIG + ENOCH_SIG + ENOCH_SIG + enoch_abcd).encode()
    opened = open_note(message, [parse_verifier_key(PETER)])
    assert len(opened.verified) == 1
    assert len(opened.unverified) == 2
    assert opened.unverified[0] != opened.unverified[1]


def test_a_bad_signature_by_a_known_key_refuses_the_whole_note():
    message = (TEXT + "\n" + PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]).encode()
    with pytest.raises(InvalidSignature, match="PeterNeumann\\+c74f20a3"):
        open_note(message, [parse_verifier_key(PETER)])
    tampered = (TEXT.replace("cryptography", "cryptograph") + "\n" + PETER_SIG).encode()
    with pytest.raises(InvalidSignature):
        open_note(tampered, [parse_verifier_key(PETER)])


def test_a_key_that_shares_only_a_name_or_an_id_with_a_known_one_is_not_it():
    other = signer_from_seed("PeterNeumann", bytes(32))
    message = sign_note(TEXT, [other])
    with pytest.raises(UnverifiedNote):
        open_note(message, [parse_verifier_key(PETER)])
    misnamed = (TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "CarmenSandiego")).encode()
    with pytest.raises(UnverifiedNote):
        open_note(misnamed, [parse_verifier_key(PETER)])


def test_two_known_keys_with_one_name_and_id_are_ambiguous():
    """Key IDs are 32 bits: these two seeds (found by a birthday search) give keys whose IDs collide
    under one name. Trusting both, no signature line can say which signed."""
    first = signer_from_seed("collide.example", (69106).to_bytes(32, "big"))
    second = signer_from_seed("collide.example", (91005).to_bytes(32, "big"))
    assert first.key_id == second.key_id == 0xC74A9C71
    assert first.verifier != second.verifier
    message = sign_note(TEXT, [first])
    assert open_note(message, [first.verifier, first.verifier]).verified  # the same key twice is one key
    with pytest.raises(AmbiguousKey):
        open_note(message, [first.verifier, second.verifier])
    with pytest.raises(InvalidSignature):  # trusting only the other key, the line names it and fails
        open_note(message, [second.verifier])


@pytest.mark.parametrize(
    "message",
    [
        TEXT,  # no signatures
        TEXT + "\n",
        TEXT + "\n" + PETER_SIG[:-1],  # the last line without its newline
        "\x01" + TEXT + "\n" + PETER_SIG,  # a control character
        TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "Bad Name")[:-1],  # a space in the name, no newline
        TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
        TEXT + "\n" + PETER_SIG + "\n",  # a blank line among the signatures
        TEXT + "\n" + "- PeterNeumann" + PETER_SIG[len("\u2014 PeterNeumann") :],  # a hyphen, not an em dash
        TEXT + "\n" + "\u2014  PeterNeumann" + PETER_SIG[len("\u2014 PeterNeumann") :],
        TEXT + "\n" + PETER_SIG.replace("=\n", "\n"),  # unpadded base64
        TEXT + "\n" + PETER_SIG.replace("AM=\n", "AN=\n"),  # base64 with stray bits
        TEXT + "\n" + "\u2014 PeterNeumann AAAAAA==\n",  # a key ID and no signature
        TEXT + "\n" + "\u2014 PeterNeumann\n",
        TEXT + "\r\n" + PETER_SIG,
        TEXT + "\n" + PETER_SIG * (MAX_SIGNATURES + 1),
    ],
)
def test_malformed_notes_are_refused(message):
    with pytest.raises(MalformedNote):
        open_note(message.encode(), [parse_verifier_key(PETER)])


def test_a_note_that_is_not_utf8_is_refused():
    with pytest.raises(MalformedNote):
        parse_note(b"\xff" + (TEXT + "\n" + PETER_SIG).encode())
    with pytest.raises(MalformedNote):
        parse_note((TEXT + "\n").encode() + b"\xed\xa0\x80\n" + PETER_SIG.encode())  # an encoded surrogate


def test_a_text_may_hold_blank_lines_and_lines_that_look_like_signatures():
    text = "first\n\n\u2014 not a signature\nlast\n"
    signer = signer_from_seed("example.com/log", bytes(range(32)))
    message = sign_note(text, [signer])
    assert open_note(message, [signer.verifier]).text == text
    assert parse_note(message) == Note(text, (signer.sign(text.encode()),))


def test_sixteen_signatures_are_accepted():
    signers = [signer_from_seed(f"witness{i}.example", bytes([i]) * 32) for i in range(16)]
    message = sign_note(TEXT, signers)
    opened = open_note(message, [s.verifier for s in signers])
    assert [s.name for s in opened.verified] == [s.name for s in signers]


@pytest.mark.parametrize("text", ["", "no newline", "tab\tinside\n", "lone \ud800 surrogate\n"])
def test_only_texts_a_note_can_carry_are_signed(text):
    with pytest.raises(MalformedNote):
        sign_note(text, [parse_signer_key(PETER_SIGNER)])


@pytest.mark.parametrize("name", ["", "a+b", "a b", "a\u00a0b", "a\u2003b", "a\u2028b", "a\x85b", "a\nb", "a\x00b"])
def test_key_names_are_non_empty_without_spaces_or_plus(name):
    with pytest.raises((MalformedNote, KeyFormatError)):
        NoteSigner(name, bytes(32))
    with pytest.raises(MalformedNote):
        NoteSignature(name, 1, b"x")


def test_a_note_needs_a_signature_to_be_formatted():
    with pytest.raises(MalformedNote):
        format_note(Note(TEXT, ()))
