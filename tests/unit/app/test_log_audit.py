"""The auditor and the witness against a log served in process (its endpoints' answers made from the
tests' own RFC 6962 implementation): consistent checkpoints pass and are saved; a log rewritten,
truncated, forked or signed by another key fails, naming the first bad checkpoint, and the saved one
stays; receipts are proven included; the witness's cosignature reaches the log."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest

from app.log_audit import AuditFailed, LogClient, SavedCheckpoint, audit, witness
from domain.transparency.checkpoint import Checkpoint, sign_checkpoint
from domain.transparency.cosignature import Cosigner, cosignatures_of
from domain.transparency.hashing import leaf_hash
from domain.transparency.keys import NoteSigner, signer_from_seed
from domain.transparency.receipt import Receipt, sign_receipt
from tests.support import plain_http
from tests.unit.domain.transparency.rfc6962_reference import Reference

LOG = signer_from_seed("tollgate.example/ledger", bytes(range(32)))
WITNESS = Cosigner("witness.example/w1", bytes(range(32, 64)))


class ServedLog:
    """A log's public endpoints, answered from its entries; each checkpoint made is kept."""

    def __init__(self, entries: list[bytes], signer: NoteSigner = LOG) -> None:
        self.entries, self.signer = entries, signer
        self.kept: list[bytes] = []
        self.cosigned: list[bytes] = []

    @property
    def reference(self) -> Reference:
        return Reference(self.entries)

    def checkpoint(self) -> bytes:
        note = sign_checkpoint(
            Checkpoint(LOG.name, len(self.entries), self.reference.root(len(self.entries))), self.signer
        )
        self.kept.append(note)
        return note

    def handle(self, request: httpx.Request) -> httpx.Response:
        q = request.url.params
        path = request.url.path
        if path == "/ledger/checkpoint":
            return httpx.Response(200, content=self.kept[-1])
        if path == "/ledger/checkpoints":
            after = int(q["after"])
            sizes = [(int(n.split(b"\n")[1]), n) for n in self.kept]
            return httpx.Response(200, json={"checkpoints": [n.decode() for s, n in sizes if s > after]})
        if path == "/ledger/proof/consistency":
            proof = self.reference.proof(int(q["from"]), int(q["to"]))
            return httpx.Response(200, json={"proof": [base64.b64encode(h).decode() for h in proof]})
        if path == "/ledger/proof/inclusion":
            proof = self.reference.path(int(q["leaf"]), int(q["size"]))
            return httpx.Response(200, json={"proof": [base64.b64encode(h).decode() for h in proof]})
        if path == "/ledger/cosignatures" and request.method == "POST":
            self.cosigned.append(request.content)
            return httpx.Response(201)
        return httpx.Response(404)

    def client(self) -> LogClient:
        return LogClient("http://gateway", LOG.verifier, plain_http.Client(transport=httpx.MockTransport(self.handle)))


def entries(n: int, prefix: bytes = b"event") -> list[bytes]:
    return [prefix + b" %d" % i for i in range(n)]


def test_consistent_checkpoints_pass_and_the_latest_is_saved(tmp_path: Path):
    log, state = ServedLog(entries(5)), SavedCheckpoint(tmp_path / "audit.json")
    log.checkpoint()
    assert audit(log.client(), state, [], 20).accepted[-1].size == 5
    for more in (9, 13, 21):
        log.entries = entries(more)
        log.checkpoint()
    finding = audit(log.client(), state, [], 20)
    assert [c.size for c in finding.accepted] == [9, 13, 21, 21]
    assert json.loads((tmp_path / "audit.json").read_text())["size"] == 21


class GrowingLog(ServedLog):
    """A log that signs another checkpoint just after each request for its latest, or just before:
    an auditor always runs beside a log that keeps growing."""

    def __init__(self, entries: list[bytes], *, after: bool) -> None:
        super().__init__(entries)
        self.after = after

    def handle(self, request: httpx.Request) -> httpx.Response:
        grows = request.url.path == ("/ledger/checkpoint" if self.after else "/ledger/checkpoints")
        if grows and not self.after:
            self._grow()
        answer = super().handle(request)
        if grows and self.after:
            self._grow()
        return answer

    def _grow(self) -> None:
        self.entries = entries(len(self.entries) + 3)
        self.checkpoint()


@pytest.mark.parametrize("after", [True, False])
def test_a_checkpoint_signed_while_the_audit_runs_is_no_truncation(tmp_path: Path, after: bool):
    log, state = GrowingLog(entries(5), after=after), SavedCheckpoint(tmp_path / "audit.json")
    log.checkpoint()
    audit(log.client(), state, [], 20)
    log._grow()
    for _ in range(3):  # each audit proves every checkpoint up to the latest it read, in order
        finding = audit(log.client(), state, [], 20)
        sizes = [c.size for c in finding.accepted]
        assert sizes == sorted(sizes)
        assert json.loads((tmp_path / "audit.json").read_text())["size"] == sizes[-1]


def test_a_month_rewritten_is_caught_at_the_first_bad_checkpoint_and_the_saved_one_kept(tmp_path: Path):
    log, state = ServedLog(entries(8)), SavedCheckpoint(tmp_path / "audit.json")
    log.checkpoint()
    audit(log.client(), state, [], 20)
    log.entries = entries(12)
    log.checkpoint()  # honest
    log.entries = [b"rewritten" if i == 3 else e for i, e in enumerate(entries(16))]
    log.checkpoint()  # history rewritten under it, and every checkpoint after
    log.entries = [b"rewritten" if i == 3 else e for i, e in enumerate(entries(20))]
    log.checkpoint()
    with pytest.raises(AuditFailed, match=r"checkpoint of 16 leaves .* is not consistent with the checkpoint of 12"):
        audit(log.client(), state, [], 20)
    assert json.loads((tmp_path / "audit.json").read_text())["size"] == 8


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda log: setattr(log, "entries", entries(5)), "truncated"),
        (lambda log: setattr(log, "entries", entries(8, b"other")), "a fork"),
        (lambda log: setattr(log, "signer", signer_from_seed(LOG.name, bytes(32))), "did not sign"),
    ],
)
def test_a_log_truncated_forked_or_signed_by_another_key_fails(tmp_path: Path, change, said: str):
    log, state = ServedLog(entries(8)), SavedCheckpoint(tmp_path / "audit.json")
    log.checkpoint()
    audit(log.client(), state, [], 20)
    change(log)
    log.checkpoint()
    with pytest.raises(AuditFailed, match=said):
        audit(log.client(), state, [], 20)


def test_receipts_are_proven_in_the_latest_checkpoint_and_a_changed_one_is_reported(tmp_path: Path):
    log = ServedLog(entries(10))
    log.checkpoint()

    def receipt(i: int, cost: int = 100) -> str:
        return sign_receipt(Receipt(LOG.name, f"r{i}", "acme", i + 1, cost, 1, i, leaf_hash(log.entries[i])), LOG)

    later = sign_receipt(Receipt(LOG.name, "r12", "acme", 13, 5, 1, 12, leaf_hash(b"x")), LOG)
    wrong_leaf = sign_receipt(Receipt(LOG.name, "r4", "acme", 5, 100, 1, 4, leaf_hash(b"not it")), LOG)
    finding = audit(log.client(), SavedCheckpoint(tmp_path / "a.json"), [receipt(1), receipt(7), later, wrong_leaf], 20)
    assert (finding.receipts_proved, finding.receipts_pending) == (2, 1)
    (failure,) = finding.failures
    assert "ProofError" in failure


def test_the_witness_cosigns_what_extends_its_last_and_refuses_what_does_not(tmp_path: Path):
    log, state = ServedLog(entries(6)), SavedCheckpoint(tmp_path / "w.json")
    log.checkpoint()
    assert witness(log.client(), state, WITNESS, now=lambda: 1_700_000_000).size == 6
    (cosigned,) = log.cosigned
    (found,) = cosignatures_of(cosigned, [WITNESS.verifier])
    assert found.timestamp == 1_700_000_000
    log.entries = entries(6, b"other") + entries(2)
    log.checkpoint()
    with pytest.raises(AuditFailed, match="not consistent"):
        witness(log.client(), state, WITNESS)
    assert len(log.cosigned) == 1
