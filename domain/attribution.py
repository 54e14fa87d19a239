"""A request's attribution: the tags and the end user a charge is reported by.

Clients name them per request (``x-tollgate-tags: project=alpha,env=ci``; ``user`` in chat
completions and responses, ``metadata.user_id`` in messages); each charge records them, and usage is
summed by tag and by end user. They are bounded here so that no request can grow the ledger or the
usage read model without limit: at most :data:`MAX_TAGS` tags, names of :data:`MAX_NAME` characters
from a small alphabet, values of :data:`MAX_VALUE` characters, end users of :data:`MAX_END_USER`.

A charge without a tag of some name counts under the value ``""`` of that dimension (shown as
``(none)``), so that the values of any dimension always add up to the team's charges exactly. How
many values a team's day counts by name is bounded too (``domain/attribution_bounds.py``); the text
itself follows the rule of every recorded client text (``domain/client_text.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from domain.client_text import ClientTextError, checked_text

MAX_TAGS = 10
MAX_NAME = 64
MAX_VALUE = 128
MAX_END_USER = 256
#: The dimension of end users; a tag's is ``tag:<name>``.
USER = "user"
TAG_PREFIX = "tag:"
#: How the value ``""`` (no tag of that name, no end user) is shown.
NONE_SHOWN = "(none)"

_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


@dataclass(frozen=True, slots=True)
class Attribution:
    """Who one request is attributed to: its tags (checked by :func:`parse_tags`) and the end user
    its client named (``""``: none), as its charge records them."""

    tags: Mapping[str, str] = field(default_factory=dict)
    end_user: str = ""


class AttributionError(ValueError):
    """A tags header or dimension that cannot be read; the message says what is wrong."""


def parse_tags(header: str) -> dict[str, str]:
    """The tags of an ``x-tollgate-tags`` header: ``name=value`` pairs separated by commas, spaces
    around each trimmed, empty items skipped. Raises :class:`AttributionError` for a pair without
    ``=``, a name given twice, or anything over the bounds."""
    tags: dict[str, str] = {}
    for item in header.split(","):
        item = item.strip()
        if not item:
            continue
        name, eq, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not eq:
            raise AttributionError(f"tag {item[:80]!r} is not name=value")
        if not _NAME.fullmatch(name):
            raise AttributionError(
                f"tag name {name[:80]!r} must be 1 to {MAX_NAME} characters of A-Z, a-z, 0-9, '_', '.', ':' and '-'"
            )
        if not 0 < len(value) <= MAX_VALUE:
            raise AttributionError(
                f"the value of tag {name!r} must be 1 to {MAX_VALUE} characters, without control characters or commas"
            )
        try:
            checked_text(value, f"tag {name}", MAX_VALUE)  # no control characters (domain/client_text.py)
        except ClientTextError as exc:
            raise AttributionError(str(exc)) from None
        if name in tags:
            raise AttributionError(f"tag {name!r} is given twice")
        tags[name] = value
        if len(tags) > MAX_TAGS:
            raise AttributionError(f"at most {MAX_TAGS} tags may be given")
    return tags


def tags_text(tags: Mapping[str, str]) -> str:
    """Tags as one canonical text, ``name=value`` pairs sorted by name, comma-separated (``""``: none);
    :func:`parse_tags` reads it back."""
    return ",".join(f"{name}={tags[name]}" for name in sorted(tags))


def tags_of_text(text: str) -> dict[str, str]:
    """Tags from their canonical text (:func:`tags_text`) as the gateway itself wrote it (a stream's
    heartbeat report): read back as they were checked then, never refused (a report written by an
    older version, under older rules, still charges its stream)."""
    return dict(pair.split("=", 1) for pair in text.split(",") if "=" in pair)


def end_user_of(value: object, field: str) -> str:
    """The end user a request names (in its ``field``), as recorded: a string's first
    :data:`MAX_END_USER` characters (the request itself goes upstream unchanged, and a long id is
    still counted, never refused); anything else, nothing. A string holding what no recorded text
    may hold (NUL, a control or bidirectional control character: ``domain/client_text.py``) is
    refused with :class:`~domain.client_text.ClientTextError` naming ``field``."""
    if not isinstance(value, str):
        return ""
    return checked_text(value, field, len(value))[:MAX_END_USER]


def dimension_of(text: str) -> str:
    """A dimension as a report asks for it: ``user`` or ``tag:<name>``."""
    if text == USER:
        return text
    if text.startswith(TAG_PREFIX) and _NAME.fullmatch(text[len(TAG_PREFIX) :]):
        return text
    raise AttributionError(
        f"unknown dimension {text!r}: expected 'user' or 'tag:<name>' "
        f"(a name of 1 to {MAX_NAME} characters of A-Z, a-z, 0-9, '_', '.', ':' and '-')"
    )


def dimensions(tags: Mapping[str, str], end_user: str) -> list[tuple[str, str]]:
    """The (dimension, value) pairs a charge is counted under: always its end user (``""``: none),
    and each of its tags. Charges without a tag of some name are that dimension's ``""``, the
    team's total less its tagged charges, so they need no row of their own."""
    return [(USER, end_user), *((f"{TAG_PREFIX}{name}", value) for name, value in tags.items())]
