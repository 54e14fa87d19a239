"""Text a client sends that the ledger records: one rule, checked where the text enters.

A request's tags, its end user, its Idempotency-Key, and an operator's reason, reference or key
label are written into events, and from them into read models, exports, statements, the dashboard
and log lines. Each is checked here, once, before anything is held or recorded:

- it is valid UTF-8 (a header's bytes are decoded as UTF-8, never as Latin-1, so ``café`` is
  recorded as ``café``; bytes that are not UTF-8 are refused, never guessed at);
- it holds no NUL (PostgreSQL's text cannot store it: one such event once stopped the audit history
  projection for every team), no other C0 control nor DEL (U+0000–U+001F, U+007F), no C1 control
  (U+0080–U+009F), no bidirectional control (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069,
  which make a shown value read differently from what it is), and no lone surrogate (not text);
- it is at most as long as its field allows.

A value that breaks the rule is refused with :class:`ClientTextError`, whose message names the
field and says what is wrong (the endpoints answer it as a 400 in their own error shape); nothing
is ever silently changed here. (Events recorded before this rule may hold such text:
``app/store/storable.py`` is how the projections and the request records store them.)
"""

from __future__ import annotations

import re
import unicodedata

#: Every character the rule refuses, as one character class.
REFUSED = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


class ClientTextError(ValueError):
    """Client text that breaks the rule; ``field`` names it, the message says what is wrong."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"'{field}' {problem}")
        self.field = field
        self.problem = problem


def checked_text(value: str, field: str, max_chars: int) -> str:
    """``value`` if it follows the rule and has at most ``max_chars`` characters; else
    :class:`ClientTextError` naming ``field``."""
    if len(value) > max_chars:
        raise ClientTextError(field, f"must be at most {max_chars} characters long (it has {len(value)})")
    if (found := REFUSED.search(value)) is not None:
        raise ClientTextError(
            field,
            f"must not contain {describe(found.group())} (at character "
            f"{found.start() + 1}): control characters, bidirectional controls and "
            "NUL are refused",
        )
    return value


def header_text(raw: str, field: str) -> str:
    """A header's value as the text its bytes spell in UTF-8. The HTTP server hands header values
    over as Latin-1 (each byte one character), so they are turned back into their bytes and decoded
    as UTF-8; bytes that are not UTF-8 are refused (:class:`ClientTextError`)."""
    if raw.isascii():
        return raw
    try:
        return raw.encode("latin-1").decode("utf-8")
    except UnicodeError:  # a character beyond Latin-1 (not from a server), or bytes that are not UTF-8
        raise ClientTextError(field, "is not valid UTF-8") from None


def describe(char: str) -> str:
    """A refused character as a person can read it in an error message: ``U+202E (RIGHT-TO-LEFT
    OVERRIDE)``, never the character itself."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" ({name})" if name else "")
