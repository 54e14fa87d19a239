"""Statement files: written as CSV and JSON, read back as the same rows with the same final hash, and
verified — their chain, then against the statement the ledger gives."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from app.ledger.service import LedgerService
from app.ledger.statement_reading import read_statement
from app.ledger.statements import statement_chunks, verify_statement
from app.ledger.writer import LedgerWriter
from app.store.event_store import LedgerStore, open_ledger_store
from domain.credit_lots import PROMOTIONAL, LotTerms
from domain.ledger import team_id
from domain.ledger_holds import RequestOnLedger
from domain.ledger_payments import PaymentFacts, Reversal
from domain.pricing import Price
from domain.usage import TokenUsage
from projections.statement_chain import COLUMNS, PREV_HASH, chained
from projections.statements import Month, Statement
from tests.support.backend import new_database_url

PRICE = Price(Decimal("2.5"), Decimal(10), Decimal("3.125"), Decimal("1.25"))
MONTH = Month.parse("2026-11")


@pytest.fixture
def store(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LedgerStore]:
    """A team opened in November 2026 with 10 credits, charged twice, topped up and adjusted."""
    monkeypatch.setattr("eventsourcing.domain.datetime_now_with_tzinfo", lambda: datetime(2026, 11, 15, tzinfo=UTC))
    monkeypatch.setattr("domain.clock.now", lambda: datetime(2026, 11, 15, tzinfo=UTC))  # what charges are dated by
    opened = open_ledger_store(new_database_url(), tmp_path)
    with LedgerWriter(opened) as writer:
        service = LedgerService(writer)
        service.create_team("acme", 10_000_000)
        tid = team_id("acme")
        for request_id, model in (("r1", "m1"), ("r2", "m2")):
            writer.on_team(
                tid, "acme", lambda t, r=request_id, m=model: t.place_hold(RequestOnLedger(r, "k1", m, "chat"), 900_000)
            )
            writer.on_team(
                tid,
                "acme",
                lambda t, r=request_id, m=model: t.charge(
                    RequestOnLedger(r, "k1", m, "chat"), TokenUsage(1234, 56), PRICE, Decimal(100)
                ),
            ).result()
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
    assert sections[5:] == [
        "opening_balance",
        "top_ups",
        "charges_by_model",
        "charges_by_model",
        "charges_by_key",
        "charges",
        "adjustments",
        "closing_balance",
        "reconciliation",
        "log_checkpoint",
        "end",
    ]
    assert all(len(line) == len(lines[0]) for line in lines)
    assert lines[4][COLUMNS.index("reference")] == 'INV-1, "quoted"'
    plain = list(csv.reader(io.StringIO(_text(store, "csv", chained_form=False))))
    assert plain[0] == list(COLUMNS)
    assert [line[:-1] for line in lines[1:-1]] == plain[1:]  # the same rows, without their hashes


def test_json_reads_as_a_document_with_its_figures(store):
    document = json.loads(_text(store, "json", chained_form=False))
    assert (document["object"], document["team"], document["month"], document["reconciled"]) == (
        "ledger.statement",
        "acme",
        MONTH.text,
        True,
    )
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
        assert (found.fmt, found.team, found.month, found.chained, found.final_hash) == (
            fmt,
            "acme",
            MONTH.text,
            True,
            final,
        )
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
    tampered = (
        text.replace(f"{digits},", f"{changed},", 1)
        if fmt == "csv"
        else text.replace(f'"amount_micros": {digits}', f'"amount_micros": {changed}', 1)
    )
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
    for changed in ([*rows[:2], rows[1], *rows[2:]], rows[:2] + rows[3:], [rows[0], rows[2], rows[1], *rows[3:]]):
        found = verify_statement("".join([header, *changed, end]), None)
        assert not found.ok
        assert "the hash chain is broken at row" in (found.problem or "")
    without_last = verify_statement("".join([header, *rows[:-1], end]), None).problem or ""
    assert "the statement has no row of section 'log_checkpoint'" in without_last
    assert "does not end with the final hash" in (verify_statement("".join([header, *rows]), None).problem or "")


def test_a_json_row_with_a_field_of_its_own_fails(store):
    document = json.loads(_text(store, "json"))
    document["entries"][0]["note"] = "fine"  # a column: changes the row's hash
    assert "broken at row 1" in (verify_statement(json.dumps(document), None).problem or "")
    document = json.loads(_text(store, "json"))
    document["entries"][0]["discount"] = "50%"  # not a column: the hash would not cover it
    assert "entries[0]: 'discount' is not a member a statement writes there" in (
        verify_statement(json.dumps(document), None).problem or ""
    )
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
    document: dict = {
        "object": "ledger.statement",
        "team": "acme",
        "month": MONTH.text,
        "from": MONTH.start.isoformat(),
        "to": MONTH.end.isoformat(),
        "chained": True,
        "genesis": rows[0][PREV_HASH],
        "entries": [],
        "charges_by_model": [],
        "charges_by_key": [],
    }
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


# -- read strictly: what the chain does not cover is refused -------------------------------------------


def _refused(text: str) -> str:
    found = verify_statement(text, None)
    assert not found.ok
    assert (found.problem or "").startswith("not a statement Tollgate can read: ")
    return found.problem or ""


def test_a_json_statement_has_the_members_the_writer_writes_and_no_other(store):
    document = json.loads(_text(store, "json"))
    assert "'amount_due' is not a member a statement writes there" in _refused(
        json.dumps({**document, "amount_due": "0", "payment_status": "paid"})
    )
    assert "the statement has no 'closing_balance'" in _refused(
        json.dumps({k: v for k, v in document.items() if k != "closing_balance"})
    )
    wrong_type = json.loads(_text(store, "json"))
    wrong_type["entries"][0]["version"] = "1"
    assert "entries[0].version" in _refused(json.dumps(wrong_type))
    a_float = json.loads(_text(store, "json"))
    a_float["charges"]["amount"] = 1.5
    assert "charges.amount" in _refused(json.dumps(a_float))
    not_a_number = _text(store, "json").replace('"amount_micros": 0', '"amount_micros": NaN', 1)
    assert "NaN is not a JSON value" in _refused(not_a_number)
    unchained = json.loads(_text(store, "json", chained_form=False))
    assert "says it is not chained, yet carries hashes" in _refused(json.dumps({**unchained, "final_hash": "0" * 64}))


def test_a_json_statement_with_a_number_too_long_or_nesting_too_deep_is_refused_not_a_crash(store):
    """Found by fuzzing: a whole number past the 4,300 digits Python reads as one, and arrays nested past
    the interpreter's stack, raised out of the reader (a traceback from ``ledger verify --statement``)."""
    text = _text(store, "json")
    huge = text.replace('"amount_micros": 0', '"amount_micros": ' + "9" * 5000, 1)
    assert huge != text
    assert "a number in it is longer than any a statement writes" in _refused(huge)
    deep = text.replace('"entries": [', '"entries": [' + "[" * 100_000, 1)
    assert "it nests arrays and objects deeper than a statement does" in _refused(deep)


def test_a_csv_statement_with_a_cell_longer_than_csv_reads_is_refused_not_a_crash(store):
    """Found by fuzzing: a cell past the ``csv`` module's 131,072 characters raised ``csv.Error`` out of
    the reader (a traceback from ``ledger verify --statement``)."""
    lines = _text(store, "csv").splitlines(keepends=True)
    lines[2] = lines[2].replace(",,", "," + "x" * 200_000 + ",", 1)
    assert "line 3 is not CSV a statement writes: field larger than field limit" in _refused("".join(lines))


def test_a_member_named_twice_is_refused_wherever_it_is(store):
    text = _text(store, "json")
    first_forged = text.replace('"closing_balance": {', '"closing_balance": {"amount": "999", ', 1)
    assert json.loads(first_forged)["closing_balance"] == json.loads(text)["closing_balance"]  # the last one wins
    assert "the member 'amount' is given twice in one object" in _refused(first_forged)
    team_twice = text.replace('"team": "acme"', '"team": "x", "team": "acme"', 1)
    assert "the member 'team' is given twice" in _refused(team_twice)


def test_a_csv_statement_is_its_rows_in_order_and_the_final_hash_alone(store):
    lines = _text(store, "csv").splitlines(keepends=True)
    header, rows, end = lines[0], lines[1:-1], lines[-1]
    noted = end.rstrip("\n").split(",")
    noted[COLUMNS.index("note")] = "paid in full"
    assert "the final hash's, has cells of its own" in _refused("".join([header, *rows, ",".join(noted) + "\n"]))

    found = read_statement(_text(store, "csv"))
    unlinked = [{k: v for k, v in row.items() if k != PREV_HASH} for row in found.rows]
    twice = [*unlinked[:-2], unlinked[-3], *unlinked[-2:]]  # the closing balance twice, the chain recomputed
    assert "a row of section 'closing_balance' cannot come here" in _refused(
        _as_csv(*chained("acme", MONTH.text, twice))
    )
    moved = [*unlinked[:2], unlinked[-3], *unlinked[2:-3], *unlinked[-2:]]  # a summary row among the entries
    assert "cannot come here" in _refused(_as_csv(*chained("acme", MONTH.text, moved)))
    other = [dict(row) for row in unlinked]
    other[1]["team"] = "someone-else"
    assert "line 3 is of team 'someone-else'" in _refused(_as_csv(*chained("acme", MONTH.text, other)))
    worded = [dict(row) for row in unlinked]
    worded[1]["amount_micros"] = "about 3"
    assert "line 3: " in _refused(_as_csv(*chained("acme", MONTH.text, worded)))


def test_the_rows_the_reader_knows_are_the_statements_columns():
    from app.ledger.statement_reading import _Cells, _CsvCells

    assert set(_CsvCells.__struct_fields__) == {*COLUMNS, PREV_HASH}
    assert set(_Cells.__struct_fields__) == {*COLUMNS, PREV_HASH} - {"team", "month", "section"}


# -- a month that is over: its statement reaches its last event -----------------------------------------


def test_a_month_that_is_over_is_verified_to_its_last_event(store, monkeypatch: pytest.MonkeyPatch):
    """A statement read while November went on is the ledger's up to its version; once November is
    over (by the clock, or because the team has a later event) only the whole month's verifies."""
    november, december = datetime(2026, 11, 20, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC)
    monkeypatch.setattr("eventsourcing.domain.datetime_now_with_tzinfo", lambda: november)
    monkeypatch.setattr("domain.clock.now", lambda: november)
    so_far = _text(store, "json")
    team = store.find_team(team_id("acme"))
    assert team is not None
    team.add_credits(1_000_000, "INV-2")
    store.save_teams([team])

    going_on = verify_statement(so_far, store, now=november)
    assert going_on.ok, going_on.problem
    assert not going_on.month_over
    over = verify_statement(so_far, store, now=december)
    assert not over.ok
    assert (
        "2026-11 is over, and the statement stops before its end: it reaches version 8, the team's last event "
        "of the month is version 9 — it has 2 charges, the month 2."
    ) in (over.problem or "")
    whole = verify_statement(_text(store, "json"), store, now=december)
    assert whole.ok, whole.problem
    assert whole.month_over

    monkeypatch.setattr("eventsourcing.domain.datetime_now_with_tzinfo", lambda: december)
    monkeypatch.setattr("domain.clock.now", lambda: december)  # a team's events are stamped by the ledger clock
    team.add_credits(1_000_000, "INV-3")  # December's first event: November is over whatever the clock says
    store.save_teams([team])
    assert "2026-11 is over" in (verify_statement(so_far, store, now=november).problem or "")


def test_text_that_looks_like_a_formula_is_marked_in_csv_and_still_verifies(store, monkeypatch: pytest.MonkeyPatch):
    """An operator's reference and reason are written as text a spreadsheet does not evaluate; the
    chain covers the text itself, so the CSV and the JSON have one final hash and both verify."""
    monkeypatch.setattr("eventsourcing.domain.datetime_now_with_tzinfo", lambda: datetime(2026, 11, 20, tzinfo=UTC))
    monkeypatch.setattr("domain.clock.now", lambda: datetime(2026, 11, 20, tzinfo=UTC))
    team = store.find_team(team_id("acme"))
    assert team is not None
    team.add_credits(1_000_000, '=HYPERLINK("http://evil.example","click")')
    team.adjust_credits(-500_000, "@SUM(A1:A9)", "\t=1+1")
    store.save_teams([team])
    text = _text(store, "csv")
    cells = [cell for line in csv.reader(io.StringIO(text)) for cell in line]
    assert '\'=HYPERLINK("http://evil.example","click")' in cells
    assert {"'@SUM(A1:A9)", "'\t=1+1", "-500000", "-0.5"} <= set(cells)  # amounts stay numbers
    assert not [c for c in cells if c and c[0] in "=+-@\t\r" and not re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", c)]
    from_csv, from_json = read_statement(text), read_statement(_text(store, "json"))
    assert from_csv.final_hash == from_json.final_hash
    entries = [row for row in from_csv.rows if row["section"] == "entry"]
    assert [(row["reference"], row["reason"]) for row in entries[-2:]] == [
        ('=HYPERLINK("http://evil.example","click")', ""),
        ("\t=1+1", "@SUM(A1:A9)"),
    ]
    assert verify_statement(text, store).ok

    unmarked = text.replace("'@SUM(A1:A9)", "@SUM(A1:A9)", 1)
    assert "its reason '@SUM(A1:A9)' is not a cell Tollgate writes" in _refused(unmarked)


def test_payments_refunds_disputes_and_expired_credit_are_entries_that_reconcile(tmp_path, monkeypatch):
    """A month with a payment, a refund taking more than was left (owed, then paid by a top-up), a
    dispute won, and a lot expiring: each an entry of its own, the sums reconciling with the replay,
    the audit history agreeing, and the statement verifying against the ledger."""
    today = [datetime(2026, 11, 2, tzinfo=UTC)]
    monkeypatch.setattr("eventsourcing.domain.datetime_now_with_tzinfo", lambda: today[0])
    monkeypatch.setattr("domain.clock.now", lambda: today[0])
    opened = open_ledger_store(new_database_url(), tmp_path)
    try:
        with LedgerWriter(opened) as writer:
            service = LedgerService(writer)
            service.create_team("acme", 1_000_000)
            tid = team_id("acme")
            expiring = LotTerms(PROMOTIONAL, datetime(2026, 11, 10, tzinfo=UTC), priority=90)  # used last
            writer.on_team(tid, "acme", lambda t: t.add_credits(300_000, "trial", terms=expiring)).result()
            writer.on_team(tid, "acme", lambda t: t.credit_payment(PaymentFacts("pi_1", 5_000_000))).result()
            writer.on_team(tid, "acme", lambda t: t.adjust_credits(-5_500_000, "moved away")).result()
            today[0] = datetime(2026, 11, 12, tzinfo=UTC)  # the trial lot expired on the 10th
            writer.on_team(tid, "acme", lambda t: t.refund_payment(Reversal("re_1", "pi_1", 2_000_000))).result()
            writer.on_team(tid, "acme", lambda t: t.open_dispute(Reversal("dp_1", "pi_1", 1_000_000))).result()
            writer.on_team(tid, "acme", lambda t: t.close_dispute("dp_1", "pi_1", won=True)).result()
            service.top_up("acme", 4_000_000, "INV-2")
        text = "".join(statement_chunks(Statement(opened, "acme", MONTH), "csv", True))
        rows = read_statement(text).rows
        kinds = [row.get("kind") for row in rows if row["section"] == "entry"]
        assert {"refund", "dispute", "dispute_closed", "expiry"} <= set(kinds)
        (reconciliation,) = [row for row in rows if row["section"] == "reconciliation"]
        assert reconciliation["reconciled"] in (True, "true"), reconciliation["note"]
        assert "refunds and disputes" in reconciliation["note"]
        by_kind = {row["kind"]: int(row["amount_micros"]) for row in rows if row["section"] == "top_ups_by_kind"}
        assert by_kind == {"paid": 8_500_000, "promotional": 300_000}  # paid and promotional credit apart
        assert verify_statement(text, opened).ok
        as_json = "".join(statement_chunks(Statement(opened, "acme", MONTH), "json", True))
        assert len(json.loads(as_json)["top_ups_by_kind"]) == 2
        assert verify_statement(as_json, opened).ok
    finally:
        opened.close()
