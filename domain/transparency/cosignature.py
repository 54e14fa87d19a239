"""C2SP tlog-cosignature (v1, Ed25519): a witness's statement that a checkpoint is consistent with
every earlier one it saw of the log.

A cosignature is a note signature line added to the checkpoint's note, by the witness's own key:

- its key ID is ``SHA-256(name || 0x0A || 0x04 || 32-byte public key)[:4]`` (``0x04``: an Ed25519
  *cosignature* key, so the same key bytes can never pass for a note-signing key, ``0x01``);
- its signature bytes are a ``timestamped_signature``: the cosigning time as 8 big-endian bytes
  (POSIX seconds, below 2^63), then the Ed25519 signature;
- what is signed is ``cosignature/v1\\n`` then ``time <seconds>\\n`` then the checkpoint's whole
  note text (its final newline included, its signature lines not).

Keys are written as the note keys are (``domain/transparency/keys.py``), with the type byte ``0x04``:
``<name>+<hex ID>+<base64(0x04 || public key)>`` for the verifier, ``PRIVATE+KEY+…`` for the signer.
Pure functions of their inputs, like the rest of the package: the caller says what time it is.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature as _BadSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from domain.transparency.keys import InvalidSignature, KeyFormatError, typed_key
from domain.transparency.note import (
    MalformedNote,
    Note,
    NoteSignature,
    check_text,
    format_note,
    parse_note,
    valid_key_name,
)

#: The signature type byte of an Ed25519 cosignature key (C2SP tlog-cosignature).
COSIGNATURE_V1 = 0x04
HEADER = "cosignature/v1\n"
MAX_TIMESTAMP = (1 << 63) - 1
_KEY_ID = re.compile(r"[0-9a-f]{8}")


def cosigner_key_id(name: str, public_key: bytes) -> int:
    """The 32-bit ID of a cosigner's Ed25519 ``public_key`` under ``name``."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([COSIGNATURE_V1]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def cosigned_message(checkpoint_text: str, timestamp: int) -> bytes:
    """What a cosignature signs: the header line, the time line, the checkpoint's note text."""
    check_text(checkpoint_text)
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise MalformedNote(f"not a cosignature time: {timestamp}")
    return f"{HEADER}time {timestamp}\n{checkpoint_text}".encode()


@dataclass(frozen=True, slots=True)
class Cosignature:
    """A verified cosignature: who cosigned, and when (POSIX seconds, as the witness said)."""

    name: str
    timestamp: int


@dataclass(frozen=True, slots=True)
class CosignerVerifier:
    """A witness's public key."""

    name: str
    public_key: bytes

    def __post_init__(self) -> None:
        if not valid_key_name(self.name):
            raise KeyFormatError(f"not a key name: {self.name!r}")
        if len(self.public_key) != 32:
            raise KeyFormatError(f"an Ed25519 public key is 32 bytes, not {len(self.public_key)}")

    @property
    def key_id(self) -> int:
        return cosigner_key_id(self.name, self.public_key)

    @property
    def key_string(self) -> str:
        typed = base64.b64encode(bytes([COSIGNATURE_V1]) + self.public_key).decode("ascii")
        return f"{self.name}+{self.key_id:08x}+{typed}"

    def check(self, checkpoint_text: str, signature: NoteSignature) -> Cosignature | None:
        """The cosignature ``signature`` is, if it is this witness's (None if another key's);
        :class:`InvalidSignature` if it claims to be and does not verify."""
        if (signature.name, signature.key_id) != (self.name, self.key_id):
            return None
        raw = signature.signature
        if len(raw) != 8 + 64:
            raise InvalidSignature(f"a cosignature by {self.name} is {len(raw)} bytes, not 72")
        timestamp = int.from_bytes(raw[:8], "big")
        try:
            message = cosigned_message(checkpoint_text, timestamp)
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(raw[8:], message)
        except (_BadSignature, MalformedNote):
            raise InvalidSignature(f"invalid cosignature by {self.name}+{self.key_id:08x}") from None
        return Cosignature(self.name, timestamp)


@dataclass(frozen=True, slots=True)
class Cosigner:
    """A witness's private key. Its seed never appears in its ``repr``."""

    name: str
    seed: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not valid_key_name(self.name):
            raise KeyFormatError(f"not a key name: {self.name!r}")
        if len(self.seed) != 32:
            raise KeyFormatError(f"an Ed25519 seed is 32 bytes, not {len(self.seed)}")

    @property
    def verifier(self) -> CosignerVerifier:
        public = Ed25519PrivateKey.from_private_bytes(self.seed).public_key()
        return CosignerVerifier(self.name, public.public_bytes(Encoding.Raw, PublicFormat.Raw))

    @property
    def key_string(self) -> str:
        """``PRIVATE+KEY+<name>+<hex ID>+<base64(0x04 || seed)>``. Secret."""
        typed = base64.b64encode(bytes([COSIGNATURE_V1]) + self.seed).decode("ascii")
        return f"PRIVATE+KEY+{self.name}+{self.verifier.key_id:08x}+{typed}"

    def cosign(self, checkpoint_text: str, timestamp: int) -> NoteSignature:
        """This witness's cosignature line of the checkpoint, made at ``timestamp``."""
        message = cosigned_message(checkpoint_text, timestamp)
        signature = Ed25519PrivateKey.from_private_bytes(self.seed).sign(message)
        return NoteSignature(self.name, self.verifier.key_id, timestamp.to_bytes(8, "big") + signature)


def parse_cosigner_verifier(text: str) -> CosignerVerifier:
    """A witness's public key from ``<name>+<hex ID>+<base64(0x04 || public key)>``."""
    name, _, rest = text.partition("+")
    hex_id, _, encoded = rest.partition("+")
    verifier = CosignerVerifier(name, typed_key(name, hex_id, encoded, COSIGNATURE_V1))
    if f"{verifier.key_id:08x}" != hex_id:
        raise KeyFormatError("the key's ID does not match its name and public key")
    return verifier


def parse_cosigner(text: str) -> Cosigner:
    """A witness's private key from ``PRIVATE+KEY+<name>+<hex ID>+<base64(0x04 || seed)>``."""
    if not text.startswith("PRIVATE+KEY+"):
        raise KeyFormatError("a signer key starts with PRIVATE+KEY+")
    name, _, rest = text[len("PRIVATE+KEY+") :].partition("+")
    hex_id, _, encoded = rest.partition("+")
    cosigner = Cosigner(name, typed_key(name, hex_id, encoded, COSIGNATURE_V1))
    if f"{cosigner.verifier.key_id:08x}" != hex_id:
        raise KeyFormatError("the key's ID does not match its name and the public key of its seed")
    return cosigner


def add_cosignatures(signed_note: bytes, cosignatures: Sequence[NoteSignature]) -> bytes:
    """The signed note with these signature lines added (a line it carries already is not repeated)."""
    note = parse_note(signed_note)
    lines = list(note.signatures)
    for cosignature in cosignatures:
        if cosignature not in lines:
            lines.append(cosignature)
    return format_note(Note(note.text, tuple(lines)))


def cosignatures_of(signed_note: bytes, witnesses: Sequence[CosignerVerifier]) -> list[Cosignature]:
    """The verified cosignatures of the given witnesses a signed checkpoint carries (the note's own
    signature is checked apart, with the log's key); one that fails to verify refuses the note."""
    note = parse_note(signed_note)
    found: list[Cosignature] = []
    for signature in note.signatures:
        for witness in witnesses:
            cosigned = witness.check(note.text, signature)
            if cosigned is not None and all(c.name != cosigned.name for c in found):
                found.append(cosigned)
    return found
