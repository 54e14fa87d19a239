"""C2SP signed-note: a text and the signature lines under it, parsed strictly. No cryptography here
(``domain/transparency/keys.py`` signs and verifies): only the format.

A signed note is UTF-8 with no ASCII control character but newline: a text ending in a newline, a
blank line, then one or more lines ``— <key name> <base64(key ID || signature)>`` (an em dash,
U+2014, and a space first). The text is everything up to and including the newline before the
*last* blank line, so it may hold blank lines of its own; every line after that blank line must be a
signature line. Key names are non-empty, with no Unicode space and no ``+``. The key ID is the
signature's first four bytes, big-endian. Anything else is refused as :class:`MalformedNote`, as
golang.org/x/mod/sumdb/note refuses it; at most :data:`MAX_SIGNATURES` lines are read (the spec asks
verifiers to accept at least 16).
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from dataclasses import dataclass

#: The most signature lines a note may carry (as Go's reference implementation).
MAX_SIGNATURES = 100
#: What starts every signature line: an em dash and a space.
SIGNATURE_PREFIX = "\u2014 "

_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")
_GO_SPACES = frozenset("\t\n\v\f\r \x85\xa0")


class MalformedNote(ValueError):
    """A note, a signature line or a key name that the signed-note format does not allow."""


def valid_key_name(name: str) -> bool:
    """A key name is non-empty and has no Unicode space (as Go's ``unicode.IsSpace``), no ``+``, and
    no control character (none can stand in a note)."""
    return bool(name) and "+" not in name and not any(_is_space_or_control(character) for character in name)


def _is_space_or_control(character: str) -> bool:
    return (
        character in _GO_SPACES
        or character < " "
        or "\ud800" <= character <= "\udfff"
        or unicodedata.category(character) in ("Zs", "Zl", "Zp")
    )


def decode_base64(text: str) -> bytes:
    """Standard base64 (RFC 4648 §4, padded) in its one canonical spelling: no other characters, and
    the text must be what encoding its bytes gives back (no stray bits in the last character)."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise MalformedNote(f"not base64: {text!r}") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise MalformedNote(f"not canonical base64: {text!r}")
    return raw


@dataclass(frozen=True, slots=True)
class NoteSignature:
    """One signature line: who signed (the key's name and 32-bit ID) and the signature's bytes."""

    name: str
    key_id: int
    signature: bytes

    def __post_init__(self) -> None:
        if not valid_key_name(self.name):
            raise MalformedNote(f"not a key name: {self.name!r}")
        if not 0 <= self.key_id < 1 << 32:
            raise MalformedNote(f"not a 32-bit key ID: {self.key_id}")
        if not self.signature:
            raise MalformedNote("an empty signature")

    @property
    def line(self) -> str:
        """The signature's line in a note, newline included."""
        encoded = base64.b64encode(self.key_id.to_bytes(4, "big") + self.signature).decode("ascii")
        return f"{SIGNATURE_PREFIX}{self.name} {encoded}\n"


@dataclass(frozen=True, slots=True)
class Note:
    """A note's text (its final newline included, the blank line not) and its signatures, in order."""

    text: str
    signatures: tuple[NoteSignature, ...]


def check_text(text: str) -> None:
    """A note text must be non-empty UTF-8 ending in a newline, with no control character but newline."""
    if not text.endswith("\n"):
        raise MalformedNote("a note's text must end with a newline")
    if _CONTROL.search(text):
        raise MalformedNote("a note's text has a control character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise MalformedNote("a note's text is not Unicode text (a lone surrogate)") from None


def format_note(note: Note) -> bytes:
    """The note's bytes: its text, a blank line, its signature lines."""
    check_text(note.text)
    if not note.signatures:
        raise MalformedNote("a note needs at least one signature")
    return (note.text + "\n" + "".join(signature.line for signature in note.signatures)).encode("utf-8")


def _parse_signature(line: str) -> NoteSignature:
    if not line.startswith(SIGNATURE_PREFIX):
        raise MalformedNote(f"not a signature line: {line!r}")
    name, _, encoded = line[len(SIGNATURE_PREFIX) :].partition(" ")
    if not valid_key_name(name) or not encoded:
        raise MalformedNote(f"not a signature line: {line!r}")
    raw = decode_base64(encoded)
    if len(raw) < 5:
        raise MalformedNote(f"a signature of {len(raw)} bytes is too short: {line!r}")
    return NoteSignature(name, int.from_bytes(raw[:4], "big"), raw[4:])


def parse_note(message: bytes) -> Note:
    """The text and signature lines of a signed note, or :class:`MalformedNote`. The signatures are
    only parsed here; ``domain.transparency.keys.open_note`` verifies them."""
    try:
        decoded = message.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedNote("a note must be UTF-8") from None
    if _CONTROL.search(decoded):
        raise MalformedNote("a note has a control character")
    split = decoded.rfind("\n\n")
    if split < 0:
        raise MalformedNote("a note has no blank line before its signatures")
    text, block = decoded[: split + 1], decoded[split + 2 :]
    if not block.endswith("\n"):
        raise MalformedNote("a note must end with a signature line and a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise MalformedNote(f"a note may carry at most {MAX_SIGNATURES} signatures")
    return Note(text, tuple(_parse_signature(line) for line in lines))
