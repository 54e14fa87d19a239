"""The one CSV writer: a spreadsheet opening any CSV Tollgate writes evaluates no cell as a formula,
numbers stay numbers, and a cell read back is the text that was written."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest

from app.spreadsheet_csv import CsvWriter, restore, safe_cell, written_as_tollgate_writes

#: What a spreadsheet evaluates, from the issue and OWASP's list: each is written after a quote.
FORMULAS = [
    '=HYPERLINK("http://evil.example","click")',
    "+cmd|' /C calc'!A0",
    "@SUM(A1:A9)",
    "-2+3",
    "\t=1+1",
    "\r=1+1",
    "\n=1",
    "  =1+1",
    "\uff1dSUM(A1)",
    "-x",
    "+",
    "-",
    "'already quoted",
    "=",
    "@",
]
#: What stays as it is: numbers (negative amounts among them) and text a spreadsheet does not evaluate.
KEPT = ["-1.5", "-1234", "0", "0.000125", "125", "alice", "project=alpha", "1e5", "a=b", "", "sum(1)", "x-1"]


@pytest.mark.parametrize("text", FORMULAS)
def test_text_a_spreadsheet_would_evaluate_is_written_as_text(text: str):
    written = safe_cell(text)
    assert written == "'" + text
    assert restore(written) == text
    assert written_as_tollgate_writes(written)
    assert not written_as_tollgate_writes(text)  # the same cell unmarked is not one Tollgate writes


@pytest.mark.parametrize("text", KEPT)
def test_numbers_and_plain_text_are_written_as_they_are(text: str):
    assert safe_cell(text) == text
    assert restore(text) == text
    assert written_as_tollgate_writes(text)


def test_typed_values_are_numbers_and_flags():
    assert [safe_cell(v) for v in (-1_000_000, 0, Decimal("-3.75"), Decimal("0.000001"), True, False, None)] == [
        "-1000000",
        "0",
        "-3.75",
        "0.000001",
        "true",
        "false",
        "",
    ]
    with pytest.raises(TypeError):
        safe_cell(1.5)  # type: ignore[arg-type]  # money is never a float


def test_the_writer_writes_every_cell_safely_and_a_reader_gets_them_back():
    out = io.StringIO()
    writer = CsvWriter(out)
    writer.row(["value", "cost_micros"])
    writer.rows([[text, -5] for text in FORMULAS])
    lines = list(csv.reader(io.StringIO(out.getvalue())))
    assert lines[0] == ["value", "cost_micros"]
    assert all(cell[:1] == "'" for cell, _ in lines[1:])
    assert [restore(cell) for cell, _ in lines[1:]] == FORMULAS
    assert {amount for _, amount in lines[1:]} == {"-5"}


def test_a_carriage_return_or_a_line_feed_in_a_cell_never_starts_a_row_of_its_own():
    out = io.StringIO()
    CsvWriter(out).rows([["alice\r=1+1,0", 1], ["bob\r\nmallory,-5", 2], ["carol\nx", 3]])
    lines = list(csv.reader(io.StringIO(out.getvalue())))
    assert [[restore(cell) for cell in cells] for cells in lines] == [
        ["alice\r=1+1,0", "1"],
        ["bob\r\nmallory,-5", "2"],
        ["carol\nx", "3"],
    ]
