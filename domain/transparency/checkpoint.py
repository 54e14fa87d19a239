"""C2SP tlog-checkpoint: the signed statement of the log's size and root.

A checkpoint's note text is at least three non-empty lines, each ending in a newline: the log's
*origin* (its identity; Tollgate's log signs with a key of the same name), the tree *size* in decimal
with no leading zero, the *root hash* in standard base64, then optional *extension lines* (opaque,
non-empty; the spec advises against them). Parsing is strict: anything else is
:class:`MalformedCheckpoint`. :func:`open_checkpoint` is what a client runs: the note's signatures
checked against the keys it trusts, then the text parsed and its origin compared with the log it
expects.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass

from domain.transparency.hashing import HASH_SIZE
from domain.transparency.keys import NoteSigner, NoteVerifier, open_note, sign_note
from domain.transparency.note import MalformedNote, check_text, decode_base64

#: The largest tree size a checkpoint may state (a signed 64-bit count, as the reference implementations).
MAX_TREE_SIZE = (1 << 63) - 1
_SIZE = re.compile(r"0|[1-9][0-9]*")


class MalformedCheckpoint(ValueError):
    """A checkpoint text that the tlog-checkpoint format does not allow, or one from another log."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The log ``origin`` at ``size`` leaves, whose tree's root is ``root_hash``."""

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.origin or "\n" in self.origin:
            raise MalformedCheckpoint(f"not an origin: {self.origin!r}")
        if not 0 <= self.size <= MAX_TREE_SIZE:
            raise MalformedCheckpoint(f"not a tree size: {self.size}")
        if len(self.root_hash) != HASH_SIZE:
            raise MalformedCheckpoint(f"a root hash is {HASH_SIZE} bytes, not {len(self.root_hash)}")
        if any(not line or "\n" in line for line in self.extensions):
            raise MalformedCheckpoint("an extension line must be one non-empty line")

    @property
    def text(self) -> str:
        """The checkpoint's note text."""
        root = base64.b64encode(self.root_hash).decode("ascii")
        text = "".join(f"{line}\n" for line in (self.origin, str(self.size), root, *self.extensions))
        try:
            check_text(text)
        except MalformedNote as error:
            raise MalformedCheckpoint(str(error)) from None
        return text


def parse_checkpoint(text: str) -> Checkpoint:
    """The checkpoint a note text states, or :class:`MalformedCheckpoint`."""
    try:
        check_text(text)
    except MalformedNote as error:
        raise MalformedCheckpoint(str(error)) from None
    lines = text[:-1].split("\n")
    if len(lines) < 3 or not all(lines):
        raise MalformedCheckpoint("a checkpoint is at least three non-empty lines")
    origin, size, root, *extensions = lines
    if not _SIZE.fullmatch(size) or int(size) > MAX_TREE_SIZE:
        raise MalformedCheckpoint(f"not a tree size: {size!r}")
    try:
        root_hash = decode_base64(root)
    except MalformedNote:
        raise MalformedCheckpoint(f"not a base64 root hash: {root!r}") from None
    return Checkpoint(origin, int(size), root_hash, tuple(extensions))


def sign_checkpoint(checkpoint: Checkpoint, signer: NoteSigner) -> bytes:
    """The signed checkpoint note, signed by ``signer`` (whose name should be the origin)."""
    return sign_note(checkpoint.text, [signer])


def open_checkpoint(message: bytes, origin: str, verifiers: Sequence[NoteVerifier]) -> Checkpoint:
    """The checkpoint of a signed note, once a trusted key's signature is verified and its origin is
    the log expected. Raises the note's errors (``domain/transparency/keys.py``) or
    :class:`MalformedCheckpoint`."""
    checkpoint = parse_checkpoint(open_note(message, verifiers).text)
    if checkpoint.origin != origin:
        raise MalformedCheckpoint(f"a checkpoint of {checkpoint.origin!r}, not of {origin!r}")
    return checkpoint
