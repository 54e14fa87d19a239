"""An auditor and a witness of a gateway's transparency log, over HTTP, trusting only the log's key.

Both keep the last checkpoint they accepted in a small JSON file of their own and accept a newer one
only with a consistency proof from it, so an operator who rewrites history after they looked is
caught the next time they look: the rewritten log cannot prove it extends what they saw.

- :func:`audit` walks every checkpoint the gateway kept since the saved one (``GET
  /ledger/checkpoints?after=SIZE``), then the latest (``GET /ledger/checkpoint``), proving each
  consistent with the one before (``GET /ledger/proof/consistency``), and names the first that is
  not; then it proves a sample of the caller's own receipts included in the latest
  (``GET /ledger/proof/inclusion``).
- :func:`witness` does the same for the latest checkpoint alone, then cosigns it (C2SP
  tlog-cosignature) and gives the gateway the cosigned note (``POST /ledger/cosignatures``), which
  it serves from then on with its checkpoint.

Nothing here reads the gateway's database or configuration: the checks are ``domain/transparency``'s.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from domain.transparency.checkpoint import Checkpoint, MalformedCheckpoint, open_checkpoint
from domain.transparency.cosignature import Cosigner, add_cosignatures
from domain.transparency.keys import NoteVerifier
from domain.transparency.note import MalformedNote, decode_base64
from domain.transparency.receipt import MalformedReceipt, open_receipt, verify_receipt
from domain.transparency.verify import ProofError, verify_consistency

TIMEOUT = 30.0


class AuditFailed(Exception):
    """The log did not prove what it must: the message names the checkpoint or receipt."""


@dataclass
class Finding:
    """What an audit found: the checkpoints it accepted, the receipts it proved, what failed."""

    accepted: list[Checkpoint] = field(default_factory=list)
    receipts_proved: int = 0
    receipts_pending: int = 0  # charged after the latest checkpoint: proved at a later audit
    failures: list[str] = field(default_factory=list)


class LogClient:
    """The gateway's public log endpoints (no key needed)."""

    def __init__(self, url: str, log_key: NoteVerifier, http: httpx.Client | None = None) -> None:
        self.url = url.rstrip("/")
        self.key = log_key
        self._http = http or httpx.Client(timeout=TIMEOUT)

    def close(self) -> None:
        self._http.close()

    def _get(self, path: str, **params: int) -> httpx.Response:
        answer = self._http.get(f"{self.url}{path}", params=params)
        if answer.status_code != 200:
            raise AuditFailed(f"GET {path} answered {answer.status_code}: {answer.text[:200]}")
        return answer

    def latest(self) -> tuple[bytes, Checkpoint]:
        note = self._get("/ledger/checkpoint").content
        return note, self.open(note)

    def open(self, note: bytes) -> Checkpoint:
        try:
            return open_checkpoint(note, self.key.name, [self.key])
        except (MalformedCheckpoint, MalformedNote, ValueError) as exc:
            raise AuditFailed(f"a checkpoint the log key did not sign, or not a checkpoint: {exc}") from None

    def kept_after(self, size: int) -> list[bytes]:
        """The checkpoints the gateway kept whose trees are larger than ``size``, oldest first."""
        found = self._get("/ledger/checkpoints", after=size).json().get("checkpoints", [])
        return [str(note).encode() for note in found]

    def _proof(self, path: str, **params: int) -> list[bytes]:
        body: Any = self._get(path, **params).json()
        try:
            return [decode_base64(h) for h in body["proof"]]
        except (KeyError, TypeError, MalformedNote):
            raise AuditFailed(f"GET {path} did not answer a list of base64 hashes") from None

    def consistency(self, old: int, new: int) -> list[bytes]:
        return self._proof("/ledger/proof/consistency", **{"from": old, "to": new})

    def inclusion(self, leaf: int, size: int) -> list[bytes]:
        return self._proof("/ledger/proof/inclusion", leaf=leaf, size=size)

    def give_cosigned(self, note: bytes) -> None:
        answer = self._http.post(f"{self.url}/ledger/cosignatures", content=note)
        if answer.status_code not in (200, 201):
            raise AuditFailed(f"the gateway refused the cosignature ({answer.status_code}): {answer.text[:200]}")


def _describe(checkpoint: Checkpoint) -> str:
    return f"the checkpoint of {checkpoint.size} leaves (root {checkpoint.root_hash.hex()[:16]}…)"


def prove_extends(client: LogClient, old: Checkpoint, new: Checkpoint) -> None:
    """Raise :class:`AuditFailed` unless ``new`` is ``old`` or a tree proven to extend it."""
    if new.size < old.size:
        raise AuditFailed(f"{_describe(new)} is smaller than {_describe(old)} seen before: the log was truncated")
    if new.size == old.size:
        if new.root_hash != old.root_hash:
            raise AuditFailed(f"{_describe(new)} has another root than {_describe(old)} seen before: a fork")
        return
    try:
        verify_consistency(old.size, new.size, old.root_hash, new.root_hash, client.consistency(old.size, new.size))
    except ProofError as exc:
        raise AuditFailed(f"{_describe(new)} is not consistent with {_describe(old)} seen before: {exc}") from None


class SavedCheckpoint:
    """The last checkpoint accepted, kept in a JSON file (none at the first run)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self, client: LogClient) -> Checkpoint | None:
        if not self.path.exists():
            return None
        saved = json.loads(self.path.read_text())
        if saved.get("origin") != client.key.name:
            raise AuditFailed(f"{self.path} holds a checkpoint of {saved.get('origin')!r}, not of {client.key.name!r}")
        return client.open(str(saved["checkpoint"]).encode())

    def save(self, note: bytes, checkpoint: Checkpoint) -> None:
        record = {"origin": checkpoint.origin, "size": checkpoint.size, "checkpoint": note.decode()}
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(record, indent=1))
        temporary.replace(self.path)  # a crash leaves the old file or the new, never half of one


def audit(client: LogClient, state: SavedCheckpoint, receipts: Sequence[str], sample: int) -> Finding:
    """Check every checkpoint since the saved one, then a sample of ``receipts``; save the latest
    only if every checkpoint held. :class:`AuditFailed` names the first that did not."""
    finding = Finding()
    previous = state.load(client)
    # The kept ones first, then the latest: a checkpoint signed between the two requests is then
    # at most the latest, never one past it that the latest would seem to truncate. Any still past
    # it (another process answering the second request, a moment behind) is left for the next audit.
    walked = client.kept_after(previous.size) if previous is not None else []
    note, latest = client.latest()
    if previous is not None:
        for kept in [*walked, note]:
            checkpoint = client.open(kept)
            if checkpoint.size > latest.size:
                continue
            prove_extends(client, previous, checkpoint)
            finding.accepted.append(checkpoint)
            previous = checkpoint
    else:
        finding.accepted.append(latest)
    state.save(note, latest)
    for header in _sampled(receipts, sample):
        _prove_receipt(client, header, note, latest, finding)
    return finding


def _sampled(receipts: Sequence[str], sample: int) -> list[str]:
    kept = [r.strip() for r in receipts if r.strip()]
    return kept if len(kept) <= sample else random.SystemRandom().sample(kept, sample)


def _prove_receipt(client: LogClient, header: str, note: bytes, latest: Checkpoint, finding: Finding) -> None:
    try:
        receipt = open_receipt(header, client.key)
        if receipt.leaf_index >= latest.size:
            finding.receipts_pending += 1
            return
        verify_receipt(header, note, client.inclusion(receipt.leaf_index, latest.size), client.key)
        finding.receipts_proved += 1
    except (MalformedReceipt, MalformedNote, ProofError, ValueError) as exc:
        finding.failures.append(f"receipt {header[:24]}…: {type(exc).__name__}: {exc}")


def witness(
    client: LogClient, state: SavedCheckpoint, cosigner: Cosigner, now: Callable[[], float] = time.time
) -> Checkpoint:
    """Cosign the latest checkpoint once it is proven to extend the last one this witness cosigned,
    and give it to the gateway; returns the checkpoint cosigned."""
    previous = state.load(client)
    note, latest = client.latest()
    if previous is not None:
        prove_extends(client, previous, latest)
    cosigned = add_cosignatures(note, [cosigner.cosign(latest.text, int(now()))])
    client.give_cosigned(cosigned)
    state.save(note, latest)
    return latest
