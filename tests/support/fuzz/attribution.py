"""Generated attribution: ``x-tollgate-tags`` header values as the bytes sent, and end users.

The findings these would have caught: a NUL in an end user stopped the audit history projection on
PostgreSQL; a tags header's UTF-8 was decoded as Latin-1 (``café`` recorded as ``cafÃ©``), and C1
and bidirectional controls passed into tag values. So the characters are drawn from where those
live — every control character (U+0000–U+001F, U+007F–U+009F), the bidirectional controls, lone
surrogates, the whole Unicode range — and the headers are bytes: UTF-8 as a client sends it,
Latin-1 and bytes that are not UTF-8 at all, commas and ``=`` where a value is, values and lists
longer than the bounds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

CONTROLS = [chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]]
BIDI = ["\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))]
#: What no recorded text may hold: every control character, the bidirectional controls, a lone surrogate.
UNRECORDABLE = frozenset([*CONTROLS, *BIDI])
#: Bytes that are not UTF-8: a stray continuation, a cut sequence, an overlong slash, a surrogate, Latin-1's é.
NOT_UTF8 = [b"\xff", b"\x80", b"\xc3", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe9", b"\xf4\x90\x80\x80"]
#: A header value an HTTP client library sends (h11's rule, under httpx): no NUL, CR, LF, form feed or
#: vertical tab, and no space or tab at either end. A request with any other is sent on a raw socket.
SENDABLE = re.compile(rb"([^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?")

NAME_CHARS = "ABCXYZabcxyz0189_.:-"
#: Characters from everywhere: the two kinds above, and the whole Unicode range (astral planes included).
ANY_CHAR = st.one_of(
    st.sampled_from(CONTROLS),
    st.sampled_from(BIDI),
    st.characters(),
    st.characters(min_codepoint=0x10000),
    st.characters(categories=["Cs"]),
    st.sampled_from([",", "=", " ", "\t", "é", "网", "🎉", "\ufeff", "\u00a0", "\u2028", "'", '"']),
)


def has_unrecordable(text: str) -> bool:
    return any(c in UNRECORDABLE or 0xD800 <= ord(c) <= 0xDFFF for c in text)


@st.composite
def _name(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["valid", "valid", "valid", "any", "long", "empty"]))
    if kind == "valid":
        return draw(st.text(NAME_CHARS, min_size=1, max_size=12))
    if kind == "long":
        return "n" * draw(st.sampled_from([64, 65, 300]))
    if kind == "empty":
        return ""
    return draw(st.text(ANY_CHAR, min_size=1, max_size=8))


@st.composite
def _value(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["plain", "plain", "unicode", "control", "bidi", "long", "any"]))
    if kind == "plain":
        return draw(st.text("abcdefghijklmnopqrstuvwxyz0123456789-_/ ", min_size=1, max_size=20))
    if kind == "unicode":
        return draw(
            st.text(
                st.characters(codec="utf-8", exclude_categories=["Cc", "Cs", "Zs", "Zl", "Zp"]), min_size=1, max_size=12
            )
        )
    if kind in ("control", "bidi"):
        at = draw(st.text("abc", max_size=4))
        return at + draw(st.sampled_from(CONTROLS if kind == "control" else BIDI)) + draw(st.text("xyz", max_size=4))
    if kind == "long":
        return draw(st.sampled_from(["v" * 128, "v" * 129, "é" * 128, "é" * 129, "v" * 20_000]))
    return draw(st.text(ANY_CHAR, min_size=0, max_size=12))


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


@st.composite
def tags_headers(draw: st.DrawFn) -> list[bytes]:
    """One or more ``x-tollgate-tags`` header values (usually one), as the bytes sent."""
    pairs = [(draw(_name()), draw(_value())) for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3, 10, 11, 40])))]
    if pairs and draw(st.integers(0, 5)) == 0:
        pairs.append(pairs[0])  # a name given twice
    items = [_utf8(name) + draw(st.sampled_from([b"=", b" = ", b"", b"=="])) + _utf8(value) for name, value in pairs]
    raw = draw(st.sampled_from([b",", b", ", b" ,", b",,"])).join(items)
    damage = draw(st.sampled_from(["none"] * 5 + ["latin1", "not_utf8", "spaces", "raw_control", "empty"]))
    if damage == "latin1":
        raw = b",".join(
            name.encode("utf-8", "replace") + b"=" + value.encode("latin-1", "replace") for name, value in pairs
        ) or "x=café".encode("latin-1")
    elif damage == "not_utf8":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from(NOT_UTF8)) + raw[at:]
    elif damage == "spaces":
        raw = b"  " + raw + b" \t"
    elif damage == "raw_control":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from([b"\x00", b"\r", b"\n", b"\r\n ", b"\x01", b"\x7f", b"\x1b"])) + raw[at:]
    elif damage == "empty":
        raw = b""
    more = draw(st.lists(st.sampled_from([b"extra=1", b"x=\xc3\xa9", b"", b"a=b,a=c"]), max_size=2))
    return [raw, *more]


def sendable(values: list[bytes]) -> bool:
    """Whether an HTTP client library would send these header values."""
    return all(SENDABLE.fullmatch(value) for value in values)


def expected_tags(values: list[bytes]) -> dict[str, str] | None:
    """The tags the headers say, read as the README's Attribution section describes them (UTF-8,
    ``name=value`` pairs separated by commas, spaces around each trimmed, empty items skipped), or
    None if they cannot be read so (not UTF-8, or a pair without ``=``)."""
    try:
        text = ",".join(value.decode("utf-8") for value in values)
    except UnicodeDecodeError:
        return None
    tags: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, eq, value = item.strip().partition("=")
        if not eq:
            return None
        tags[name.strip()] = value.strip()
    return tags


# -- end users ------------------------------------------------------------------------------------


@st.composite
def _end_user_text(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["plain", "control", "bidi", "surrogate", "any", "any", "long", "huge"]))
    if kind == "plain":
        return draw(st.text(st.characters(codec="utf-8", exclude_categories=["Cc", "Cs"]), max_size=30))
    if kind in ("control", "bidi", "surrogate"):
        char = draw(
            st.sampled_from(CONTROLS if kind == "control" else BIDI)
            if kind != "surrogate"
            else st.characters(categories=["Cs"])
        )
        before, after = draw(st.text("user-", max_size=6)), draw(st.text("@x.y", max_size=4))
        return before + char + after
    if kind == "long":
        return draw(st.sampled_from(["u" * 255 + "\x00", "u" * 256 + "\x00", "é" * 300, "🎉" * 257]))
    if kind == "huge":
        return "u" * draw(st.sampled_from([257, 10_000, 300_000]))
    return draw(st.text(ANY_CHAR, max_size=40))


#: End users that are not strings: recorded as no end user.
WRONG_TYPES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.lists(st.text(max_size=3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def end_users() -> st.SearchStrategy[Any]:
    return st.one_of(_end_user_text(), _end_user_text(), _end_user_text(), WRONG_TYPES)


@dataclass(frozen=True)
class EndUserCase:
    """A request whose end user was generated: the body as sent (lone surrogates written as JSON
    escapes, or as the bytes that spell them, which are not UTF-8), the model it names, whether it
    asks for a stream, and the end user it says (its first 256 characters are what a charge records;
    ``""``: none, as for a value that is not a string)."""

    body: bytes
    model: str
    stream: bool
    says: str


@st.composite
def end_user_cases(draw: st.DrawFn, endpoint: str, models: list[str]) -> EndUserCase:
    user = draw(end_users())
    model = draw(st.sampled_from(models))
    hi = [{"role": "user", "content": "hello end user"}]
    says = user if isinstance(user, str) else ""
    if endpoint == "messages":
        body: dict[str, Any] = {"model": model, "max_tokens": 16, "messages": hi}
        metadata = draw(st.sampled_from(["user_id", "user_id", "user_id", "more", "not_an_object"]))
        if metadata == "not_an_object":
            body["metadata"], says = user, ""
        else:
            body["metadata"] = {"user_id": user, **({"x": 1} if metadata == "more" else {})}
    elif endpoint == "responses":
        body = {"model": model, "input": "hello end user", "user": user}
    else:
        body = {"model": model, "messages": hi, "user": user}
    stream = draw(st.integers(0, 3)) == 0
    if stream:
        body["stream"] = True
    raw = json.dumps(body, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    return EndUserCase(raw, model, stream, says)
