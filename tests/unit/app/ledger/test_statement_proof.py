"""Statements anchored to the transparency log: each entry names its event's leaf, the statement the
first checkpoint that holds its last event, and ``verify_statement`` proves the rows are in that tree
— so an event changed after it was logged, a checkpoint signed by another key, or a log rewritten
since a checkpoint the caller kept, each fails; a statement of form 1 (before the log) still verifies."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from app.ledger.log_checkpoints import sign_now
from app.ledger.service import LedgerService
from app.ledger.statement_reading import read_statement
from app.ledger.statements import statement_chunks, verify_statement
from app.ledger.writer import LedgerWriter
from app.store.database import Sql
from app.store.event_store import LedgerStore, open_ledger_store
from app.store.log_reads import KeptCheckpoint, LogReads
from domain.ledger import team_id
from domain.ledger_holds import RequestOnLedger
from domain.pricing import Price
from domain.transparency.keys import signer_from_seed
from domain.usage import TokenUsage
from projections.statement_chain import COLUMNS_V1, PREV_HASH, Chain, cell
from projections.statements import Month, Statement
from tests.support.backend import RawDatabase, new_database_url

LOG = signer_from_seed("gateway.example.com/ledger", bytes(range(32)))
OTHER = signer_from_seed("gateway.example.com/ledger", bytes(32))
PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))
MONTH = Month.parse("2026-11")


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LedgerStore, str, Path]]:
    """Team acme in November 2026: opened, charged three times, topped up; and its database's url."""
    monkeypatch.setattr("eventsourcing.domain.datetime_now_with_tzinfo", lambda: datetime(2026, 11, 15, tzinfo=UTC))
    monkeypatch.setattr("domain.clock.now", lambda: datetime(2026, 11, 15, tzinfo=UTC))  # what charges are dated by
    url = new_database_url()
    store = open_ledger_store(url, tmp_path)
    with LedgerWriter(store) as writer:
        service = LedgerService(writer)
        service.create_team("acme", 10_000_000)
        for n in range(3):
            _charge(writer, "acme", f"r{n}")
        service.top_up("acme", 2_500_000, "INV-1")
    yield store, url, tmp_path
    store.close()


def _charge(writer: LedgerWriter, team: str, request_id: str) -> None:
    request = RequestOnLedger(request_id, "k1", "m1", "chat")
    writer.on_team(team_id(team), team, lambda t: t.place_hold(request, 900_000))
    writer.on_team(team_id(team), team, lambda t: t.charge(request, TokenUsage(1234, 56), PRICE, Decimal(100))).result()


def _sign(store: LedgerStore) -> KeptCheckpoint:
    sql = Sql(store.database)
    try:
        kept = sign_now(LogReads(sql), LOG)
    finally:
        sql.close()
    assert kept is not None
    return kept


def _leaves(store: LedgerStore, size: int) -> list[tuple[int, object, int]]:
    sql = Sql(store.database)
    try:
        return list(LogReads(sql).events(0, size))
    finally:
        sql.close()


def _statement(store: LedgerStore, fmt: str = "csv") -> str:
    return "".join(statement_chunks(Statement(store, "acme", MONTH), fmt, True))


def test_a_statement_is_anchored_to_the_first_checkpoint_holding_its_last_event_and_its_rows_proven(ledger):
    store, _url, _base = ledger
    early = _statement(store)
    unanchored = verify_statement(early, store, log_key=LOG.verifier)
    assert unanchored.ok
    assert unanchored.proof is None
    assert "not anchored yet: no checkpoint holds leaf" in unanchored.unproven

    first = _sign(store)
    texts = {}
    for fmt in ("csv", "json"):
        text = texts[fmt] = _statement(store, fmt)
        found = read_statement(text)
        entries = [row for row in found.rows if row["section"] == "entry"]
        logged = {v: i for i, _, v in _leaves(store, first.size)}
        assert [int(cell(row["leaf"])) for row in entries] == [logged[int(cell(row["version"]))] for row in entries]
        anchor = found.rows[-1]
        assert (anchor["section"], int(cell(anchor["count"])), anchor["note"]) == (
            "log_checkpoint",
            first.size,
            first.note,
        )
        check = verify_statement(text, store, log_key=LOG.verifier)
        assert check.ok, check.problem
        assert check.proof is not None
        assert check.proof.rows_proven == len(entries) == 5
        assert check.proof.checkpoint_size == first.size

    # the log grows (another team), a later checkpoint is signed: the statement still names the first
    with LedgerWriter(store) as writer:
        LedgerService(writer).create_team("other", 1_000_000)
        _charge(writer, "other", "o1")
    later = _sign(store)
    assert later.size > first.size
    assert {fmt: _statement(store, fmt) for fmt in texts} == texts  # regenerated: the very same statement
    held = verify_statement(text, store, log_key=LOG.verifier, trusted=later.note.encode())
    assert held.ok, held.problem
    assert held.proof is not None
    assert held.proof.trusted_size == later.size

    by_another = verify_statement(text, store, log_key=OTHER.verifier)
    assert not by_another.ok
    assert "is not one of gateway.example.com/ledger's, signed by its key" in (by_another.problem or "")
    stale = verify_statement(early, store, log_key=LOG.verifier)
    assert not stale.ok
    assert "before a checkpoint held its last event" in (stale.problem or "")
    assert "export the statement again" in (stale.problem or "")


def test_an_event_changed_after_it_was_logged_fails_naming_its_row(ledger):
    store, url, base = ledger
    _sign(store)
    text = _statement(store)
    raw = RawDatabase(url, base)
    event_id, state = raw.events("Charged")[1]
    record = json.loads(state)
    record["end_user"] = "someone-else"  # not a statement column: regenerating it compares equal
    raw.set_event_state(event_id, json.dumps(record, separators=(",", ":")).encode())
    check = verify_statement(text, store, log_key=LOG.verifier)
    assert not check.ok
    assert "charge at version" in (check.problem or "")
    assert "(r1)" in (check.problem or "")
    assert "it was changed after it was logged" in (check.problem or "")


def test_a_rewritten_log_resigned_passes_alone_and_fails_against_a_checkpoint_kept_from_before(ledger):
    store, url, base = ledger
    kept = _sign(store)
    before = _statement(store)
    raw = RawDatabase(url, base)
    event_id, state = raw.events("Charged")[0]
    record = json.loads(state)
    record["end_user"] = "someone-else"
    raw.set_event_state(event_id, json.dumps(record, separators=(",", ":")).encode())
    raw.relog()  # the log rebuilt from the rewritten events, its checkpoints dropped
    _sign(store)  # and signed again, by the same key

    after = _statement(store)
    alone = verify_statement(after, store, log_key=LOG.verifier)
    assert alone.ok, alone.problem  # consistent with itself: only what was kept from before can tell
    against = verify_statement(after, store, log_key=LOG.verifier, trusted=kept.note.encode())
    assert not against.ok
    assert "is not consistent with your checkpoint" in (against.problem or "")
    old = verify_statement(before, store, log_key=LOG.verifier)
    assert not old.ok  # the statement the customer holds names a tree the log no longer has


def test_a_statement_of_form_1_still_verifies_and_says_its_rows_are_not_proven(ledger):
    store, _, _ = ledger
    _sign(store)
    rows = [
        {c: row.get(c) for c in COLUMNS_V1}
        for row in Statement(store, "acme", MONTH).rows()
        if row["section"] != "log_checkpoint"
    ]
    chain = Chain("acme", MONTH.text, form=1)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*COLUMNS_V1, PREV_HASH])
    for row in chain.links(rows):
        writer.writerow([cell(row.get(c)) for c in (*COLUMNS_V1, PREV_HASH)])
    writer.writerow(
        [cell({"team": "acme", "month": MONTH.text, "section": "end"}.get(c)) for c in COLUMNS_V1] + [chain.last]
    )
    check = verify_statement(out.getvalue(), store, log_key=LOG.verifier)
    assert check.ok, check.problem
    assert check.file.form == 1
    assert "form 1" in check.unproven
    held = verify_statement(out.getvalue(), store, log_key=LOG.verifier, trusted=_sign_more(store).note.encode())
    assert not held.ok
    assert "cannot be proven consistent with your checkpoint" in (held.problem or "")


def _sign_more(store: LedgerStore) -> KeptCheckpoint:
    with LedgerWriter(store) as writer:
        LedgerService(writer).create_team("more", 1)
    return _sign(store)
