"""Every CSV file Tollgate writes, through one writer that is safe to open in a spreadsheet.

A CSV export holds text that clients and operators chose — tags, end users, references, reasons,
model names — and a spreadsheet evaluates a cell that begins with ``=``, ``+``, ``-`` or ``@`` (and,
in some, a TAB, a carriage return or their full-width forms) as a formula: ``=HYPERLINK(…)`` sends
whoever clicks it somewhere, ``+cmd|' /C calc'!A0`` asks to run a program. So every cell goes
through :func:`safe_cell`:

- **A number stays a number**: a whole or decimal number, negative or not (``-1.5``, ``-1234``,
  ``0.000125``), is written as it is — it cannot be a formula, and a money column must stay numeric
  for the sums a spreadsheet does (an int or a ``Decimal`` is always one).
- **Any other cell whose first character (after spaces) is a formula's** — ``= + - @``, TAB, CR, LF,
  or the full-width forms of the first four (U+FF1D, U+FF0B, U+FF0D, U+FF20) — **gets a single quote
  before it** (``'=HYPERLINK(…)``), which spreadsheets show as text and never evaluate; so does a cell
  that already begins with a quote, so that the quote Tollgate adds is always the first of a cell and
  :func:`restore` can take it off again: a file read back (a statement being verified) has exactly
  the text that was written into it.

A cell holding a comma, a double quote, a line feed or a carriage return is quoted (``"…"``, its
quotes doubled), as the ``csv`` module does — except that the module, told to end lines with a line
feed, leaves a carriage return unquoted, and a spreadsheet (or ``csv.reader``) then breaks the line there:
a client's end user could add rows of its own. So the lines are written here, not by ``csv.writer``,
which the lint bans everywhere else (each layer's ``ruff.toml``): a new export cannot bypass this.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import TextIO

#: What a cell may hold: text, a number, a flag or nothing (money is never a float here).
Cell = str | int | Decimal | bool | None

#: The first characters a spreadsheet may read a formula (or a command) from.
FORMULA_STARTS = frozenset("=+-@\t\r\n\uff1d\uff0b\uff0d\uff20")  # and their full-width forms
#: The mark put before a cell that must be text; a cell beginning with it is marked too (reversibly).
TEXT_MARK = "'"
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
#: What makes a cell need quotes.
_QUOTED = re.compile(r'[,"\r\n]')


def _text(value: Cell) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return f"{value:f}"
    if isinstance(value, str):
        return value
    raise TypeError(f"a CSV cell holds text, a number or a flag, not {type(value).__name__}")


def needs_mark(text: str) -> bool:
    """Whether a cell's text must be written with :data:`TEXT_MARK` before it."""
    if _NUMBER.fullmatch(text):
        return False
    first = text.lstrip(" ")[:1]
    return first in FORMULA_STARTS or first == TEXT_MARK


def safe_cell(value: Cell) -> str:
    """The cell as written: a number as it is, text that could be read as a formula marked as text."""
    text = _text(value)
    return TEXT_MARK + text if text and needs_mark(text) else text


def restore(written: str) -> str:
    """The text a cell held before :func:`safe_cell` wrote it."""
    return written.removeprefix(TEXT_MARK)


def written_as_tollgate_writes(written: str) -> bool:
    """Whether a cell read from a file is one :func:`safe_cell` could have written (a formula left
    unmarked, or a quote that is not the mark, is not)."""
    return safe_cell(restore(written)) == written


def _quoted(cell: str) -> str:
    return '"' + cell.replace('"', '""') + '"' if _QUOTED.search(cell) else cell


def line(cells: Iterable[Cell]) -> str:
    """One CSV line (ended by a line feed), every cell through :func:`safe_cell`."""
    return ",".join(_quoted(safe_cell(c)) for c in cells) + "\n"


class CsvWriter:
    """CSV lines written to ``out``, every cell through :func:`safe_cell`."""

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def row(self, cells: Iterable[Cell]) -> None:
        self._out.write(line(cells))

    def rows(self, rows: Iterable[Iterable[Cell]]) -> None:
        self._out.writelines(line(cells) for cells in rows)


def read_lines(text: str) -> Iterator[list[str]]:
    """The lines of a CSV file as their cells, as written (:func:`restore` gives the text back)."""
    return csv.reader(io.StringIO(text))
