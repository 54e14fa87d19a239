"""The demo upstream's audio endpoints, answered in process in OpenAI's wire shape.

``/audio/transcriptions`` and ``/audio/translations`` read the uploaded form (the multipart body the
gateway sends, parsed as a provider would) and the file's duration (``app/audio_duration.py``, the
reader the gateway holds with), and answer a sentence saying how many seconds of which file they
heard: JSON (``usage: {"type": "duration", "seconds": N}``, as whisper-1 reports it), ``text``,
``srt`` or ``vtt``. ``/audio/speech`` answers a WAV of silence, 50 ms per input character, in 4 KiB
chunks, as a provider streams its audio.
"""

from __future__ import annotations

import asyncio
import io
import math
import wave
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from multipart import MultipartParser

from app.audio_duration import header_length
from app.errors import InvalidRequest, UpstreamFailure
from app.upstream.media import RawAnswer, Upload

SECONDS_PER_CHARACTER = 0.05
CHUNK = 4096
_TYPES = {"mp3": "audio/mpeg", "opus": "audio/opus", "aac": "audio/aac", "flac": "audio/flac", "wav": "audio/wav"}


async def transcription(path: str, upload: Upload) -> RawAnswer:
    data = b"".join([chunk async for chunk in upload.chunks()])  # the demo's own copy: small files
    boundary = upload.content_type.partition("boundary=")[2].strip('"')
    fields: dict[str, str] = {}
    audio: tuple[bytes, str] | None = None
    for part in MultipartParser(
        io.BytesIO(data), boundary, content_length=len(data), spool_limit=2**27, memory_limit=2**27
    ):
        if part.filename is not None:
            audio = (part.raw, part.filename)
        else:
            fields[part.name] = part.value
    if audio is None:
        raise UpstreamFailure("The demo upstream got no file.")
    length = header_length(io.BytesIO(audio[0]))
    if length is None or length <= 0:
        raise InvalidRequest("Audio file might be corrupted or unsupported", param="file")
    seconds = math.ceil(round(length, 3))
    verb = "translated" if path.endswith("translations") else "transcribed"
    text = f"The Tollgate demo {verb} {seconds} seconds of {audio[1]}."
    fmt = fields.get("response_format", "json")
    if fmt == "text":
        return RawAnswer("text/plain; charset=utf-8", (text + "\n").encode())
    if fmt in ("srt", "vtt"):
        end = f"00:00:{min(length, 59.999):06.3f}"
        body = (
            f"WEBVTT\n\n00:00:00.000 --> {end}\n{text}\n"
            if fmt == "vtt"
            else f"1\n00:00:00,000 --> {end.replace('.', ',')}\n{text}\n"
        )
        return RawAnswer("text/plain; charset=utf-8", body.encode())
    answer: dict[str, Any] = {"text": text, "usage": {"type": "duration", "seconds": seconds}}
    if fmt == "verbose_json":
        answer = {"task": verb.removesuffix("d"), "duration": round(length, 3), **answer}
    return RawAnswer("application/json", msgspec.json.encode(answer))


def speech_wav(characters: int) -> bytes:
    """A WAV of silence as long as ``characters`` of speech (8 kHz, 16-bit mono)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\0\0" * int(8000 * SECONDS_PER_CHARACTER * characters))
    return buffer.getvalue()


class DemoSpeech:
    """The demo's speech audio as a byte stream."""

    def __init__(self, body: dict[str, Any]) -> None:
        text = body.get("input")
        self._audio = speech_wav(len(text) if isinstance(text, str) else 0)
        fmt = body.get("response_format") or "mp3"
        self.content_type = _TYPES.get(str(fmt), "audio/wav")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for offset in range(0, len(self._audio), CHUNK):
            await asyncio.sleep(0)
            yield self._audio[offset : offset + CHUNK]

    def close(self) -> None:
        self._audio = b""


class WholeAnswer:
    """A whole answer as a byte stream of one chunk (a transcription asked as a stream of an upstream
    that answers it whole, as whisper-1 does)."""

    def __init__(self, answer: RawAnswer) -> None:
        self.content_type = answer.content_type
        self._content = answer.content

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._content

    def close(self) -> None:
        self._content = b""
