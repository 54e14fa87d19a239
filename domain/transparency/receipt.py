"""A charge's receipt: what the gateway says it charged, signed with the log's key, naming the leaf
of the log that records the charge, so a client that keeps it can prove later, with a checkpoint and
an inclusion proof, that the operator's log has that charge.

A receipt is a signed note (C2SP signed-note) by the log's key, whose text is these lines, each
ending in a newline, in this order:

    tollgate.receipt/v1
    <the log's origin>
    request <the request id>
    team <the team>
    event <the charge event's version in the team's ledger>
    cost <micro-credits charged>
    balance_after <micro-credits, the team's balance after the charge>
    leaf <the charge event's leaf index in the log>
    leaf_hash <the leaf's hash, standard base64>

The first line keeps a receipt from ever being read as a checkpoint signed by the same key (a
checkpoint's second line is a tree size, a receipt's an origin, which is never a number), and a
checkpoint from being read as a receipt. Amounts are integers (micro-credits), no float anywhere.
On the wire (the ``x-tollgate-receipt`` header) the note's bytes are sent in standard base64, on
one line. :func:`verify_receipt` is what a client runs, offline.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass

from domain.transparency.checkpoint import Checkpoint, open_checkpoint
from domain.transparency.hashing import HASH_SIZE
from domain.transparency.keys import NoteSigner, NoteVerifier, open_note, sign_note
from domain.transparency.note import MalformedNote, check_text, decode_base64
from domain.transparency.verify import ProofError, verify_inclusion

HEADER = "tollgate.receipt/v1"
_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)")
_FIELDS = ("request", "team", "event", "cost", "balance_after", "leaf", "leaf_hash")


class MalformedReceipt(ValueError):
    """Text that is not a receipt, or a receipt that does not verify; the message says which."""


@dataclass(frozen=True, slots=True)
class Receipt:
    """What a receipt states."""

    origin: str
    request_id: str
    team: str
    event_version: int
    cost: int
    balance_after: int
    leaf_index: int
    leaf_hash: bytes

    def __post_init__(self) -> None:
        for name, value in (("origin", self.origin), ("request", self.request_id), ("team", self.team)):
            if not value or "\n" in value or value != value.strip():
                raise MalformedReceipt(f"a receipt's {name} is one non-empty line, not {value!r}")
        if _NUMBER.fullmatch(self.origin):
            raise MalformedReceipt("a log's origin is not a number")
        if self.event_version < 1 or self.leaf_index < 0 or self.cost < 0:
            raise MalformedReceipt("a receipt's event version, leaf index and cost are not negative")
        if len(self.leaf_hash) != HASH_SIZE:
            raise MalformedReceipt(f"a leaf hash is {HASH_SIZE} bytes")

    @property
    def text(self) -> str:
        hashed = base64.b64encode(self.leaf_hash).decode("ascii")
        lines = (
            HEADER,
            self.origin,
            f"request {self.request_id}",
            f"team {self.team}",
            f"event {self.event_version}",
            f"cost {self.cost}",
            f"balance_after {self.balance_after}",
            f"leaf {self.leaf_index}",
            f"leaf_hash {hashed}",
        )
        text = "".join(f"{line}\n" for line in lines)
        try:
            check_text(text)
        except MalformedNote as exc:
            raise MalformedReceipt(str(exc)) from None
        return text


def parse_receipt(text: str) -> Receipt:
    """The receipt a note text states, or :class:`MalformedReceipt`."""
    lines = text.split("\n")
    if len(lines) != len(_FIELDS) + 3 or lines[-1] or lines[0] != HEADER:
        raise MalformedReceipt(f"a receipt is {len(_FIELDS) + 2} lines, the first {HEADER!r}")
    values: dict[str, str] = {}
    for name, line in zip(_FIELDS, lines[2:-1], strict=True):
        key, _, value = line.partition(" ")
        if key != name or not value:
            raise MalformedReceipt(f"expected the line {name!r}, found {line[:40]!r}")
        values[name] = value
    numbers = {}
    for name in ("event", "cost", "balance_after", "leaf"):
        if not _NUMBER.fullmatch(values[name]):
            raise MalformedReceipt(f"{name} is not an integer: {values[name][:40]!r}")
        numbers[name] = int(values[name])
    try:
        leaf_hash = decode_base64(values["leaf_hash"])
    except MalformedNote:
        raise MalformedReceipt("leaf_hash is not base64") from None
    return Receipt(
        lines[1],
        values["request"],
        values["team"],
        numbers["event"],
        numbers["cost"],
        numbers["balance_after"],
        numbers["leaf"],
        leaf_hash,
    )


def sign_receipt(receipt: Receipt, signer: NoteSigner) -> str:
    """The receipt as the header carries it: its signed note, in standard base64."""
    return base64.b64encode(sign_note(receipt.text, [signer])).decode("ascii")


def open_receipt(header: str, log_key: NoteVerifier) -> Receipt:
    """The receipt of an ``x-tollgate-receipt`` value, once the log key's signature is verified."""
    try:
        note = base64.b64decode(header.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise MalformedReceipt("a receipt is a signed note in standard base64") from None
    return parse_receipt(open_note(note, [log_key]).text)


@dataclass(frozen=True, slots=True)
class VerifiedReceipt:
    """A receipt proven in the log: what it states, and the checkpoint it was proven against."""

    receipt: Receipt
    checkpoint: Checkpoint


def verify_receipt(
    header: str, checkpoint_note: bytes, proof: Sequence[bytes], log_key: NoteVerifier
) -> VerifiedReceipt:
    """Check, with no database, that the receipt is the log key's, the checkpoint is the same log's
    and signed by its key, and the inclusion proof leads from the receipt's leaf to the checkpoint's
    root. Raises :class:`MalformedReceipt`, the note's errors, ``MalformedCheckpoint`` or
    :class:`~domain.transparency.verify.ProofError`, naming what failed."""
    receipt = open_receipt(header, log_key)
    checkpoint = open_checkpoint(checkpoint_note, receipt.origin, [log_key])
    if receipt.leaf_index >= checkpoint.size:
        raise ProofError(f"leaf {receipt.leaf_index} is beyond the checkpoint's {checkpoint.size} leaves: a later one")
    verify_inclusion(receipt.leaf_index, checkpoint.size, receipt.leaf_hash, proof, checkpoint.root_hash)
    return VerifiedReceipt(receipt, checkpoint)
