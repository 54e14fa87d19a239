"""Statement files: written as CSV and JSON, read back as the same rows with the same final hash, and
verified — their chain, then against the statement the ledger gives."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from app.ledger.service import LedgerService
from app.ledger.statements import read_statement, statement_chunks, verify_statement
from app.ledger.writer import LedgerWriter
from domain.ledger import team_id
from domain.pricing import Price, TokenUsage
from projections.event_store import LedgerStore, open_ledger_store
from projections.statement_chain import COLUMNS, PREV_HASH, chained
from projections.statements import Month, Statement
from tests.support.backend import new_database_url

PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))
MONTH = Month.parse("2026-11")


@pytest.fixture
def store(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LedgerStore]:
    """A team opened in November 2026 with 10 credits, charged twice, topped up and adjusted."""
    monkeypatch.setattr("eventsourcing.domain.datetime_now_with_tzinfo", lambda: datetime(2026, 11, 15, tzinfo=UTC))
    opened = open_ledger_store(new_database_url(), tmp_path)
    with LedgerWriter(opened) as writer:
        service = LedgerService(writer)
        service.create_team("acme", 10_000_000)
        tid = team_id("acme")
        for request_id, model in (("r1", "m1"), ("r2", "m2")):
            writer.on_team(tid, "acme", lambda t, r=request_id, m=model: t.place_hold(r, 900_000, "k1", m, "chat"))
            writer.on_team(tid, "acme", lambda t, r=request_id, m=model: t.charge(
                r, TokenUsage(1234, 56), PRICE, Decimal(100), key_id="k1", model=m, endpoint="chat")).result()
        service.top_up("acme", 2_500_000, 'INV-1, "quoted"')
        service.adjust_credits("acme", -1_000_000, "billed twice", "T-1")
    yield opened
    opened.close()


def _text(store: LedgerStore, fmt: str, chained_form: bool = True) -> str:
    return "".join(statement_chunks(Statement(store, "acme", MONTH), fmt, chained_form))


def test_csv_is_a_header_line_rows_and_the_final_hash(store):
    lines = list(csv.reader(io.StringIO(_text(store, "csv"))))
    assert lines[0] == [*COLUMNS, PREV_HASH]
    sections = [line[2] for line in lines[1:]]
    assert sections[:5] == ["entry"] * 5  # the opening top-up, two charges, a top-up, an adjustment
    assert sections[5:] == ["opening_balance", "top_ups", "charges_by_model", "charges_by_model", "charges_by_key",
                            "charges", "adjustments", "closing_balance", "reconciliation", "end"]
    assert all(len(line) == len(lines[0]) for line in lines)
    assert lines[4][COLUMNS.index("reference")] == 'INV-1, "quoted"'
    plain = list(csv.reader(io.StringIO(_text(store, "csv", chained_form=False))))
    assert plain[0] == list(COLUMNS)
    assert [line[:-1] for line in lines[1:-1]] == plain[1:]  # the same rows, without their hashes


def test_json_reads_as_a_document_with_its_figures(store):
    document = json.loads(_text(store, "json", chained_form=False))
    assert (document["object"], document["team"], document["month"], document["reconciled"]) == \
        ("ledger.statement", "acme", MONTH.text, True)
    assert [e["kind"] for e in document["entries"]] == ["top_up", "charge", "charge", "top_up", "adjustment"]
    assert [m["model"] for m in document["charges_by_model"]] == ["m1", "m2"]
    assert [k["key_id"] for k in document["charges_by_key"]] == ["k1"]
    charged = document["charges"]["amount_micros"]
    assert isinstance(charged, int)
    assert Decimal(document["charges"]["amount"]) * 1_000_000 == charged
    assert document["closing_balance"]["amount_micros"] == 10_000_000 - charged + 2_500_000 - 1_000_000
    assert "prev_hash" not in document["charges"]
    assert "final_hash" not in document


def test_both_formats_carry_the_same_rows_and_final_hash(store):
    rows = list(Statement(store, "acme", MONTH).rows())
    _, final = chained("acme", MONTH.text, rows)
    for fmt in ("csv", "json"):
        found = read_statement(_text(store, fmt))
        assert (found.fmt, found.team, found.month, found.chained, found.final_hash) == \
            (fmt, "acme", MONTH.text, True, final)
        assert len(found.rows) == len(rows)
        assert verify_statement(_text(store, fmt), store).ok


def test_a_statement_verifies_against_the_ledger_and_without_it(store):
    text = _text(store, "csv")
    alone = verify_statement(text, None)
    assert alone.ok
    assert not alone.against_ledger
    checked = verify_statement(text, store)
    assert checked.ok
    assert checked.against_ledger
    assert checked.ledger_version == store.find_team(team_id("acme")).version  # type: ignore[union-attr]


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_one_changed_digit_fails_naming_the_row(store, fmt):
    text = _text(store, fmt)
    charge = read_statement(text).rows[1]
    digits = str(charge["amount_micros"])
    changed = digits[:-1] + str((int(digits[-1]) + 1) % 10)
    tampered = text.replace(f"{digits},", f"{changed},", 1) if fmt == "csv" else \
        text.replace(f'"amount_micros": {digits}', f'"amount_micros": {changed}', 1)
    assert tampered != text
    found = verify_statement(tampered, None)
    assert not found.ok
    where = "line 3" if fmt == "csv" else "entries[1]"
    assert f"the hash chain is broken at row 2 ({where}), charge at version" in (found.problem or "")


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_chain_recomputed_after_a_change_fails_against_the_ledger(store, fmt):
    found = read_statement(_text(store, fmt))
    rows = [{k: v for k, v in row.items() if k != PREV_HASH} for row in found.rows]
    rows[1]["amount_micros"] = int(rows[1]["amount_micros"]) + 1
    relinked, final = chained("acme", MONTH.text, rows)
    forged = _as_csv(relinked, final) if fmt == "csv" else _as_json(relinked, final)
    assert verify_statement(forged, None).ok  # the chain alone holds
    against = verify_statement(forged, store)
    assert not against.ok
    assert "row 2" in (against.problem or "")
    assert "its amount_micros is" in (against.problem or "")


def test_inserted_removed_and_reordered_rows_fail(store):
    lines = _text(store, "csv").splitlines(keepends=True)
    header, rows, end = lines[0], lines[1:-1], lines[-1]
    for changed in ([*rows[:2], rows[1], *rows[2:]], rows[:2] + rows[3:], [rows[0], rows[2], rows[1], *rows[3:]],
                    rows[:-1]):
        found = verify_statement("".join([header, *changed, end]), None)
        assert not found.ok
        assert "the hash chain is broken at row" in (found.problem or "")
    assert "does not end with the final hash" in (verify_statement("".join([header, *rows]), None).problem or "")


def test_a_json_row_with_a_field_of_its_own_fails(store):
    document = json.loads(_text(store, "json"))
    document["entries"][0]["note"] = "fine"  # a column: changes the row's hash
    assert "broken at row 1" in (verify_statement(json.dumps(document), None).problem or "")
    document = json.loads(_text(store, "json"))
    document["entries"][0]["discount"] = "50%"  # not a column: the hash would not cover it
    assert "has field(s) a statement row does not: discount" in (verify_statement(json.dumps(document), None).problem
                                                                  or "")
    document = json.loads(_text(store, "json"))
    document["reconciled"] = False
    assert "'reconciled'" in (verify_statement(json.dumps(document), None).problem or "")


def test_an_unchained_or_foreign_file_is_refused(store):
    assert "no hash chain" in (verify_statement(_text(store, "csv", chained_form=False), store).problem or "")
    assert "no hash chain" in (verify_statement(_text(store, "json", chained_form=False), store).problem or "")
    assert "not a statement" in (verify_statement("a,b\n1,2\n", None).problem or "")
    assert "not a statement" in (verify_statement('{"object": "list"}', None).problem or "")


def _as_csv(rows: list[dict], final: str) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*COLUMNS, PREV_HASH])
    writer.writerows([["" if row.get(c) is None else str(row[c]) for c in (*COLUMNS, PREV_HASH)] for row in rows])
    writer.writerow(["acme", MONTH.text, "end", *[""] * (len(COLUMNS) - 3), final])
    return out.getvalue()


def _as_json(rows: list[dict], final: str) -> str:
    document: dict = {"object": "ledger.statement", "team": "acme", "month": MONTH.text,
                      "from": MONTH.start.isoformat(), "to": MONTH.end.isoformat(), "chained": True,
                      "genesis": rows[0][PREV_HASH], "entries": [], "charges_by_model": [], "charges_by_key": []}
    for row in rows:
        body = {k: v for k, v in row.items() if k not in ("team", "month", "section")}
        if row["section"] == "entry":
            document["entries"].append(body)
        elif row["section"] in ("charges_by_model", "charges_by_key"):
            document[row["section"]].append(body)
        else:
            document[row["section"]] = body
    document["reconciled"] = document["reconciliation"]["reconciled"]
    document["final_hash"] = final
    return json.dumps(document)
