"""An answer's head made sendable before anything is charged for it, and checked on its way out.

HTTP header values are Latin-1 text without control characters (RFC 9110, section 5.5). A value
that is not Latin-1 cannot even be encoded; one with a line break (or another control character)
is refused by uvicorn when the head is sent — after it has counted the answer as started, so the
client gets no answer at all, only a closed connection. A billed answer whose head failed there had
been charged already: the client paid for an answer it never got, and its SDK, retrying, paid again.

So, at the root and then as a guard:

- Every header value made of a client's text goes through :func:`header_text`, which percent-encodes
  it (its UTF-8 bytes, as RFC 8187 encodes header parameters): text that is already a plain token,
  such as every real tool type, is left as it is.
- A billed answer's head is encoded and checked by :func:`encoded_headers` while its call is only
  held (``app/http/billed_call.py``): a head that cannot be sent releases the hold and answers the
  endpoint's JSON error, before the upstream is called and long before any charge.
- Every answer's head is checked once more, by the same rules as uvicorn's, on its way out
  (:func:`check`, from ``app/http/request_guard.py``), so whatever slips through becomes the
  endpoint's JSON error rather than uvicorn's plain-text 500 or a cut connection.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping
from urllib.parse import quote

from app.errors import GatewayError

#: What uvicorn refuses in a header's name (anything but an RFC 9110 token's characters) and value
#: (control characters but HTAB): its own patterns, so that what passes here passes there.
_BAD_NAME = re.compile(b'[\x00-\x1f\x7f()<>@,;:\\[\\]={} \t\\\\"]')
_BAD_VALUE = re.compile(b"[\x00-\x08\x0a-\x1f\x7f]")
#: Characters a header value made of a client's text keeps as they are: visible ASCII, less ``%``
#: (the escape) and ``,`` (which separates the items of a list-valued header).
_KEPT = "".join(c for c in string.punctuation if c not in "%,")


class UnsendableHead(GatewayError):
    """An answer's header that HTTP cannot carry (the gateway's fault: every client text is encoded)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"The gateway could not send this answer: its header {name!r} is not valid in HTTP.")


def header_text(text: str) -> str:
    """``text`` as a header value: its UTF-8 bytes percent-encoded but for visible ASCII other than
    ``%`` and ``,`` (decode it with any URL decoder: ``urllib.parse.unquote``)."""
    return quote(text, safe=_KEPT)


def encoded_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """The headers as they are sent (names lower-cased, Latin-1), or :class:`UnsendableHead`."""
    encoded = []
    for name, value in headers.items():
        try:
            encoded.append((name.lower().encode("latin-1"), str(value).encode("latin-1")))
        except UnicodeEncodeError:
            raise UnsendableHead(name) from None
    check(encoded)
    return encoded


def check(headers: Iterable[tuple[bytes, bytes]]) -> None:
    """Raise :class:`UnsendableHead` for a header uvicorn would refuse (one search over all the names
    and one over all the values: this runs for every answer)."""
    headers = list(headers)
    if (
        _BAD_NAME.search(b"".join(name for name, _ in headers)) is None
        and _BAD_VALUE.search(b"".join(value for _, value in headers)) is None
    ):
        return
    for name, value in headers:
        if _BAD_NAME.search(name) or _BAD_VALUE.search(value):
            raise UnsendableHead(name.decode("latin-1"))
