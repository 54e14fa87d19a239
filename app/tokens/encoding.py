"""OpenAI's o200k_base tokenizer, loaded offline from the file vendored in this package.

Why vendored: ``tiktoken.get_encoding("o200k_base")`` downloads the ranks from OpenAI's blob storage
on first use, and a gateway must count tokens with no network access at run time. The ranks ship
here gzip-compressed (``o200k_base.tiktoken.gz``, regenerated and hash-checked by
``scripts/vendor_tokenizer.py``) and are handed to ``tiktoken.Encoding`` with the pattern and special
tokens copied from ``tiktoken_ext/openai_public.py``: the same encoder, exact for OpenAI's models.

The encoder is built once per process, on first use (about 0.4 s), under a lock; ``warm_up`` builds it
at start-up, before the server listens, so no request waits for it. Counts of long strings are cached
(agents resend the whole conversation every turn, so most of a prompt was counted a turn ago).
"""

from __future__ import annotations

import asyncio
import binascii
import gzip
import io
import threading
from collections import OrderedDict
from importlib import resources

import tiktoken

#: The SHA-256 tiktoken pins for o200k_base.tiktoken; the vendored file, unzipped, must match it.
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
DATA_FILE = "o200k_base.tiktoken.gz"

_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_SPECIAL_TOKENS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


def vendored_ranks_file() -> bytes:
    """The vendored ``.tiktoken`` file, unzipped (byte-identical to OpenAI's)."""
    return gzip.decompress(resources.files("app.tokens").joinpath(DATA_FILE).read_bytes())


def _read_ranks() -> dict[bytes, int]:
    """The ranks, read line by line from the gzip file (not unzipped whole into memory first: the
    peak RSS of a gateway process is set by this load)."""
    ranks: dict[bytes, int] = {}
    # A megabyte's buffer over the gzip stream, and binascii's decoder without base64's checks of
    # its argument's type: 200,000 lines read in a third of the time (a gateway's start, and each of
    # its workers', waits on it).
    with (
        resources.files("app.tokens").joinpath(DATA_FILE).open("rb") as raw,
        gzip.open(raw) as unzipped,
        io.BufferedReader(unzipped, 1 << 20) as lines,
    ):
        for line in lines:
            token, _, rank = line.partition(b" ")
            if rank:
                ranks[binascii.a2b_base64(token, strict_mode=True)] = int(rank)
    return ranks


def o200k() -> tiktoken.Encoding:
    """The o200k_base encoder, built on first use and shared by every thread of the process."""
    global _encoding
    if _encoding is None:
        with _lock:
            if _encoding is None:
                encoding = tiktoken.Encoding(
                    name="o200k_base", pat_str=_PAT_STR, mergeable_ranks=_read_ranks(), special_tokens=_SPECIAL_TOKENS
                )
                # The encoder keeps its own copy of the ranks (in Rust); the Python dict of 200,000
                # entries is kept only for pickling, which nothing here does: 28 MB of RSS per process.
                del encoding._mergeable_ranks
                _encoding = encoding
    return _encoding


async def warm_up() -> None:
    """Build the encoder before the server takes its first connection (off the event loop), so the
    first request does not wait for it: a request arriving while it was built in the background
    waited a third of a second."""
    await asyncio.to_thread(o200k)


class _CountCache:
    """o200k counts of long strings, least recently used first out, bounded by their total size."""

    def __init__(self, max_chars: int) -> None:
        self._max_chars = max_chars
        self._chars = 0
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> int | None:
        with self._lock:
            count = self._counts.get(text)
            if count is not None:
                self._counts.move_to_end(text)
            return count

    def put(self, text: str, count: int) -> None:
        with self._lock:
            if text in self._counts:
                return
            self._counts[text] = count
            self._chars += len(text)
            while self._chars > self._max_chars:
                old, _ = self._counts.popitem(last=False)
                self._chars -= len(old)


#: Strings shorter than this are counted every time (cheaper than hashing and locking).
CACHE_MIN_CHARS = 512
_cache = _CountCache(max_chars=32 * 1024 * 1024)


def count_o200k(text: str) -> int:
    """Exact number of o200k_base tokens in ``text`` (special-token text counted as plain text)."""
    if len(text) < CACHE_MIN_CHARS:
        return len(o200k().encode_ordinary(text)) if text else 0
    count = _cache.get(text)
    if count is None:
        count = len(o200k().encode_ordinary(text))
        _cache.put(text, count)
    return count
