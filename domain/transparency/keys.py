"""Ed25519 keys for signed notes, in golang.org/x/mod/sumdb/note's key strings, and signing and
opening notes with them.

A key's ID is the first four bytes (big-endian) of ``SHA-256(name || 0x0A || 0x01 || public key)``,
``0x01`` naming Ed25519 (C2SP signed-note). The verifier key, safe to publish, is
``<name>+<8 hex digits of the ID>+<base64(0x01 || 32-byte public key)>``; the signer key, secret, is
``PRIVATE+KEY+<name>+<ID>+<base64(0x01 || 32-byte seed)>``, the RFC 8032 seed the private key is
derived from. Both are parsed strictly: lowercase hex, canonical base64, and an ID that must match
the key (for a signer key, the public key derived from the seed). Generating a key is the caller's:
:func:`signer_from_seed` takes 32 random bytes, so this module stays a pure function of its inputs.
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

from domain.transparency.note import (
    MalformedNote,
    Note,
    NoteSignature,
    check_text,
    decode_base64,
    format_note,
    parse_note,
    valid_key_name,
)

#: The signature type byte of Ed25519 (C2SP signed-note).
ED25519 = 0x01
_KEY_ID = re.compile(r"[0-9a-f]{8}")


class KeyFormatError(ValueError):
    """A key string that is not a well-formed Ed25519 note key, or whose ID does not match it."""


class InvalidSignature(ValueError):
    """A signature by a known key that does not verify: the whole note is refused."""


class UnverifiedNote(ValueError):
    """A well-formed note with no signature by any known key."""


class AmbiguousKey(ValueError):
    """Two known keys share a name and an ID: which one signed cannot be told."""


def key_id(name: str, public_key: bytes) -> int:
    """The 32-bit ID of the Ed25519 ``public_key`` (32 bytes) under ``name``."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([ED25519]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


@dataclass(frozen=True, slots=True)
class NoteVerifier:
    """A public key that verifies a name's signatures."""

    name: str
    public_key: bytes

    def __post_init__(self) -> None:
        if not valid_key_name(self.name):
            raise KeyFormatError(f"not a key name: {self.name!r}")
        if len(self.public_key) != 32:
            raise KeyFormatError(f"an Ed25519 public key is 32 bytes, not {len(self.public_key)}")

    @property
    def key_id(self) -> int:
        return key_id(self.name, self.public_key)

    @property
    def key_string(self) -> str:
        """The verifier key: ``<name>+<hex ID>+<base64(0x01 || public key)>``."""
        return f"{self.name}+{self.key_id:08x}+{_b64(bytes([ED25519]) + self.public_key)}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, message)
        except _BadSignature:
            return False
        return True


@dataclass(frozen=True, slots=True)
class NoteSigner:
    """A private key that signs as a name. Its seed never appears in its ``repr``."""

    name: str
    seed: bytes = field(repr=False)
    #: The key and its verifier, made once: each costs a scalar multiplication, and a gateway signs
    #: a receipt for every charge (three of them a signature, 130 µs, before; one, 55 µs, now).
    _key: Ed25519PrivateKey = field(init=False, repr=False, compare=False)
    _verifier: NoteVerifier = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not valid_key_name(self.name):
            raise KeyFormatError(f"not a key name: {self.name!r}")
        if len(self.seed) != 32:
            raise KeyFormatError(f"an Ed25519 seed is 32 bytes, not {len(self.seed)}")
        key = Ed25519PrivateKey.from_private_bytes(self.seed)
        public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_verifier", NoteVerifier(self.name, public))

    @property
    def verifier(self) -> NoteVerifier:
        return self._verifier

    @property
    def key_id(self) -> int:
        return self.verifier.key_id

    @property
    def key_string(self) -> str:
        """The signer key: ``PRIVATE+KEY+<name>+<hex ID>+<base64(0x01 || seed)>``. Secret."""
        return f"PRIVATE+KEY+{self.name}+{self.key_id:08x}+{_b64(bytes([ED25519]) + self.seed)}"

    def sign(self, message: bytes) -> NoteSignature:
        """This key's signature line for a note whose text is ``message``."""
        return NoteSignature(self.name, self._verifier.key_id, self._key.sign(message))


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def signer_from_seed(name: str, seed: bytes) -> NoteSigner:
    """A signer for ``name`` from 32 random bytes (the caller's ``secrets.token_bytes(32)``)."""
    return NoteSigner(name, seed)


def typed_key(name: str, hex_id: str, encoded: str, type_byte: int = ED25519) -> bytes:
    """The 32 key bytes after ``type_byte`` (0x01: a note key; 0x04: a cosignature key), once the name
    and the ID's spelling are checked."""
    if not valid_key_name(name) or not _KEY_ID.fullmatch(hex_id):
        raise KeyFormatError("malformed key: a name, then 8 lowercase hex digits")
    try:
        typed = decode_base64(encoded)
    except MalformedNote:
        raise KeyFormatError("malformed key: its key data is not base64") from None
    if len(typed) != 33 or typed[0] != type_byte:
        raise KeyFormatError(f"not an Ed25519 key of this kind (type byte {type_byte:#04x} and 32 bytes)")
    return typed[1:]


def parse_verifier_key(text: str) -> NoteVerifier:
    """The verifier of a key string ``<name>+<hex ID>+<base64(0x01 || public key)>``."""
    name, _, rest = text.partition("+")
    hex_id, _, encoded = rest.partition("+")
    verifier = NoteVerifier(name, typed_key(name, hex_id, encoded))
    if f"{verifier.key_id:08x}" != hex_id:
        raise KeyFormatError("the key's ID does not match its name and public key")
    return verifier


def parse_signer_key(text: str) -> NoteSigner:
    """The signer of a key string ``PRIVATE+KEY+<name>+<hex ID>+<base64(0x01 || seed)>``."""
    if not text.startswith("PRIVATE+KEY+"):
        raise KeyFormatError("a signer key starts with PRIVATE+KEY+")
    name, _, rest = text[len("PRIVATE+KEY+") :].partition("+")
    hex_id, _, encoded = rest.partition("+")
    signer = NoteSigner(name, typed_key(name, hex_id, encoded))
    if f"{signer.key_id:08x}" != hex_id:
        raise KeyFormatError("the key's ID does not match its name and the public key of its seed")
    return signer


def sign_note(text: str, signers: Sequence[NoteSigner]) -> bytes:
    """The signed note of ``text`` (ending in a newline) with one signature line per signer, in order."""
    check_text(text)
    message = text.encode("utf-8")
    return format_note(Note(text, tuple(signer.sign(message) for signer in signers)))


@dataclass(frozen=True, slots=True)
class OpenedNote:
    """A note whose known signatures all verified: its text, the signatures by known keys
    (``verified``, at least one) and the others (``unverified``, which the spec says to ignore)."""

    text: str
    verified: tuple[NoteSignature, ...]
    unverified: tuple[NoteSignature, ...]


def open_note(message: bytes, verifiers: Sequence[NoteVerifier]) -> OpenedNote:
    """Parse a signed note and verify every signature by a known key (C2SP signed-note): a signature by
    a known key that fails refuses the note (:class:`InvalidSignature`); signatures by unknown keys,
    even ones sharing a name or an ID with a known key, are kept aside unverified; a note with no
    verified signature is refused (:class:`UnverifiedNote`). Repeated identical lines count once."""
    known: dict[tuple[str, int], NoteVerifier] = {}
    for verifier in verifiers:
        if (verifier.name, verifier.key_id) in known and known[verifier.name, verifier.key_id] != verifier:
            raise AmbiguousKey(f"two keys are {verifier.name}+{verifier.key_id:08x}")
        known[verifier.name, verifier.key_id] = verifier
    note = parse_note(message)
    text = note.text.encode("utf-8")
    verified: list[NoteSignature] = []
    unverified: list[NoteSignature] = []
    for signature in note.signatures:
        found = known.get((signature.name, signature.key_id))
        if found is None:
            if signature not in unverified:
                unverified.append(signature)
            continue
        if not found.verify(text, signature.signature):
            raise InvalidSignature(f"invalid signature for key {signature.name}+{signature.key_id:08x}")
        if all((seen.name, seen.key_id) != (signature.name, signature.key_id) for seen in verified):
            verified.append(signature)
    if not verified:
        raise UnverifiedNote("the note has no signature by a known key")
    return OpenedNote(note.text, tuple(verified), tuple(unverified))
