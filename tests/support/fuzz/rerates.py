"""Generated inputs of ``tollgate ledger rerate``: a period's bounds as people and tools spell them,
and price files as people write them.

The findings behind it: the same day written with a ``+01:00`` offset, or the same prices file with a
comment added, was applied again (three applies refunded 254 credits on a day of 2.09); and a
re-rate refunded more than the charges had collected. So the bounds here are the instants around a
team's charges spelled every way ``--from`` and ``--to`` are read (offsets, fractional seconds,
dates, the basic format, bounds at the ends of the calendar, garbage), and the prices the same
prices or others spelled every way TOML allows (comments, key order, ``1.250``, ``125e-2``,
``1_000``), wrong types, huge numbers, and files that are not TOML or not UTF-8.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

from hypothesis import strategies as st

#: fake-gpt's prices (tests/support/gateway.py), USD per million tokens.
PRICES = {
    "input": Decimal("2.5"),
    "output": Decimal(10),
    "cache_create": Decimal("3.125"),
    "cache_hit": Decimal("1.25"),
}
GARBAGE_BOUNDS = [
    "",
    "now",
    "yesterday",
    "2026-02-30",
    "2026-13-01",
    "9999-12-31",
    "0001-01-01",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00",
    "2026-11-01T24:00:00",
    "2026-11-01T23:59:60",
    "2026-11-01T10:00:00+24:00",
    "2026-11-01T10:00:00+99:99",
    "\u0662\u0660\u0662\u0666-\u0661\u0661-\u0660\u0661",  # Arabic-Indic digits
    "\uff12\uff10\uff12\uff16-\uff11\uff11-\uff10\uff11",
    "2026-W44-1",
    "2026-305",
    "1e9",
    "-1",
    "2026-11-01T10:00:00.1234567890123",
    "--help",
    "-x",
    "2026-11-01\t",
    " 2026-11-01",
]


@dataclass(frozen=True)
class Moments:
    """The instants around a team's charges: before the first, between its two batches, after the last."""

    start: datetime
    middle: datetime
    end: datetime


@st.composite
def bound(draw: st.DrawFn, moments: Moments) -> str:
    """One bound of a period, spelled."""
    kind = draw(st.sampled_from(["instant"] * 5 + ["date", "garbage"]))
    if kind == "garbage":
        return draw(st.sampled_from(GARBAGE_BOUNDS) | st.text(max_size=12).filter(lambda t: "\x00" not in t))
    base = draw(
        st.sampled_from(
            [
                moments.start,
                moments.middle,
                moments.end,
                moments.end + timedelta(hours=1),
                moments.start - timedelta(days=1),
            ]
        )
    )
    base += timedelta(microseconds=draw(st.sampled_from([0, 0, 1, -1, 500_000])))
    if kind == "date":
        return base.date().isoformat() if draw(st.booleans()) else base.strftime("%Y%m%d")
    offset = timezone(timedelta(minutes=draw(st.sampled_from([0, 0, 60, -60, 330, -570, 845, -(23 * 60 + 59)]))))
    when = base.astimezone(offset)
    spelling = draw(st.sampled_from(["iso", "z", "naive", "milliseconds", "minutes", "space", "basic"]))
    if spelling == "z" and offset.utcoffset(None) == timedelta(0):
        return when.replace(tzinfo=None).isoformat() + "Z"
    if spelling == "naive":
        return base.astimezone(UTC).replace(tzinfo=None).isoformat()
    if spelling == "milliseconds":
        return when.isoformat(timespec="milliseconds")
    if spelling == "minutes":
        return when.isoformat(timespec="minutes")
    if spelling == "space":
        return when.isoformat(sep=" ")
    if spelling == "basic":
        return when.strftime("%Y%m%dT%H%M%S%z")
    return when.isoformat()


def _number(value: Decimal) -> st.SearchStrategy[str]:
    """``value`` spelled as TOML allows, or something else in its place."""
    same = [f"{value}", f"{value:.4f}", f"{value:E}", f"+{value}", f"{value}0" if "." in f"{value}" else f"{value}.0"]
    if value == value.to_integral_value():
        same += [f"{int(value)}", f"{int(value):_}"]
    other = [
        "0",
        "-1",
        "-0.0",
        "1e308",
        "1e400",
        "inf",
        "nan",
        "1" + "0" * 40,
        "0x10",
        "0.000000001",
        '"2.5"',
        "[2.5]",
        "{a = 1}",
        "true",
        "1979-05-27",
        "2.5.1",
        "",
    ]
    return (
        st.sampled_from(same)
        | st.sampled_from([f"{value * k}" for k in (Decimal("0.1"), Decimal("0.5"), 2)])
        | st.sampled_from(other)
    )


@st.composite
def price_files(draw: st.DrawFn) -> bytes:
    """A price list file: TOML ``[[models]]`` with an ``id`` and a ``pricing`` table, or not quite."""
    kind = draw(st.sampled_from(["list"] * 6 + ["not_toml", "not_utf8", "empty"]))
    if kind == "not_toml":
        return draw(
            st.sampled_from(
                [
                    b"[[models]\nid = 1",
                    b"models = [",
                    b"\x00",
                    b'[[models]]\nid = "fake-gpt"\npricing = {input = 1, input = 2}',
                ]
            )
        )
    if kind == "empty":
        return draw(st.sampled_from([b"", b"\n# nothing\n", b"models = []", b"[[models]]"]))
    lines = []
    for _ in range(draw(st.integers(1, 2))):
        rates = [f"{name} = {draw(_number(value))}" for name, value in PRICES.items() if draw(st.integers(0, 9))]
        rates += draw(
            st.lists(
                st.sampled_from(
                    ["cache_write_1h = 6.25", "x = 1", "long_context = {}", "tool_fees = {web_search = 10}"]
                ),
                max_size=1,
            )
        )
        rates = draw(st.permutations(rates))
        model = draw(st.sampled_from(['"fake-gpt"'] * 4 + ['"fake-claude"', '"nope"', '""', "1", '"fake-gpt" # x']))
        if draw(st.booleans()):
            lines += [
                "# prices, as finance wrote them",
                "[[models]]",
                f"pricing = {{{', '.join(rates)}}}",
                f"id = {model}",
            ]
        else:
            lines += ["[[models]]", f"id = {model}  # the model", "[models.pricing]", *rates]
    raw = ("\n".join(lines) + "\n").encode()
    if kind == "not_utf8":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from([b"\xff", b"\xe9", b"\xc3"])) + raw[at:]
    return raw


def respelled(text: str) -> str:
    """The same bound spelled otherwise: an instant at +05:30 (a naive one is UTC); a date, or what is
    not an instant, as it is."""
    if len(text) == 10:
        return text
    try:
        when = datetime.fromisoformat(text)
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(INDIA).isoformat()
    except (ValueError, OverflowError):
        return text


INDIA = timezone(timedelta(hours=5, minutes=30))
REASONS = st.none() | st.sampled_from(
    ["price correction", "", "=HYPERLINK(1)", "r\u202eeason", "line\nbreak", "\x1b[31mred", "é" * 300]
)
