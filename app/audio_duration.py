"""An uploaded audio file's duration, read from the file's own header before the upstream is called.

A transcription is priced per second of audio, so its hold must know the seconds before the upstream
says anything: the gateway reads them from the file it was sent, as the provider will. ``mutagen``
does the reading: pure Python (no native library to install or to crash on hostile input), kept for
twenty years by the Quod Libet authors, and it reads the duration of every format OpenAI's audio
endpoints take but WebM (WAV, MP3, FLAC, Ogg Vorbis and Opus, MP4/M4A, MPEG audio). It reads the
header and at most a few frames, never the whole file; a file it cannot read, or that says it holds
no audio, is the client's error (400), and nothing is held or charged.

What is billed is whole seconds, rounded up (OpenAI bills whisper per second): a file of 3.2 s holds,
and is charged, 4 seconds unless the upstream reports its own count.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import IO

import anyio
import mutagen

from app.errors import InvalidRequest

#: The formats whose duration is read (``mutagen`` reads their headers), as the error names them.
READABLE = "flac, m4a, mp3, mp4, mpeg, mpga, oga, ogg, opus, wav"


def header_length(fileobj: IO[bytes]) -> float | None:
    """The audio's length in seconds as its header says, or None if no reader takes the file."""
    try:
        found = mutagen.File(fileobj)
    except Exception:  # noqa: BLE001 - whatever a malformed header makes the reader raise, it is unreadable
        return None
    info = getattr(found, "info", None)
    length = getattr(info, "length", None)
    return float(length) if isinstance(length, int | float) else None


async def audio_seconds(fileobj: IO[bytes], param: str = "file") -> int:
    """The whole seconds of audio in ``fileobj`` (a rewound, seekable file), rounded up; read off the
    event loop (a header parse of hostile input should not stall other requests). A file whose
    duration cannot be read is a 400 naming ``param``."""
    length = await anyio.to_thread.run_sync(header_length, fileobj)
    if length is None or not math.isfinite(length):
        raise InvalidRequest(
            f"The audio in '{param}' could not be read: its format is not one whose duration this gateway "
            f"reads ({READABLE}), or the file is damaged.",
            param=param,
        )
    if length <= 0:
        raise InvalidRequest(f"The audio in '{param}' is empty: it holds no seconds of sound.", param=param)
    exact = Decimal(repr(length)).quantize(Decimal("0.001"))  # the header's milliseconds, float noise left out
    return math.ceil(exact)
