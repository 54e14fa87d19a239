"""The fake upstream's audio endpoints, as OpenAI answers them.

- ``POST /v1/audio/transcriptions`` and ``/v1/audio/translations``: a multipart/form-data body
  (``file``, ``model``, ``language``, ``prompt``, ``response_format``, ``temperature``,
  ``timestamp_granularities[]``). The audio's duration is read from the file itself (``wave`` for a
  WAV, ``mutagen`` for anything else), as the provider measures it. ``whisper-1`` answers every
  ``response_format`` (``json``, the default, ``text``, ``srt``, ``verbose_json``, ``vtt``) and
  reports ``usage: {"type": "duration", "seconds": N}`` (whole seconds, rounded up) in its JSON
  transcriptions; its translations carry no usage. ``gpt-4o-transcribe`` and
  ``gpt-4o-mini-transcribe`` take ``json`` and ``text`` only and report token usage
  (``{"type": "tokens", "input_tokens", "input_token_details": {"audio_tokens", "text_tokens"},
  "output_tokens", "total_tokens"}``: 10 audio tokens a second, the prompt's words as text tokens).
  Asked with ``stream=true`` they answer server-sent events, as OpenAI streams a transcription: a
  ``transcript.text.delta`` per word of the text, then ``transcript.text.done`` with the whole text
  and the usage; whisper-1 ignores ``stream`` (OpenAI's does) and answers whole.
- ``POST /v1/audio/speech``: a JSON body (``model``, ``input``, ``voice``, ``response_format``,
  ``speed``, ``instructions``); the answer is a WAV of silence, 50 ms per input character, streamed
  in 4 KiB chunks with no ``content-length`` (as OpenAI streams it, chunked), content type by format.

Directives, in ``prompt`` (transcriptions) or ``input`` (speech), as chat's: ``[[fail:CODE]]``,
``[[latency:MS]]``, ``[[drop-after:N]]`` (speech: the connection breaks after N chunks; a streamed
transcription: after N events), ``[[chunk-delay:MS]]`` (a streamed transcription: before each
event; speech: after each chunk, as a voice made as it is spoken).
"""

from __future__ import annotations

import asyncio
import io
import math
import wave
from typing import Any

import msgspec
import mutagen
from multipart import MultipartParser

from tests.support.fake_upstream import (
    _bad,
    _Directives,
    _drop,
    _parse_directives,
    _Reject,
    _send_json,
    before_answering,
    error_body,
    openai_failure,
    openai_request,
    tokens,
)

Send = Any
Receive = Any

FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
TOKEN_MODELS = ("gpt-4o-transcribe", "gpt-4o-mini-transcribe")
#: Audio tokens a transcription model counts per second of audio.
AUDIO_TOKENS_PER_SECOND = 10
SPEECH_TYPES = {
    "mp3": "audio/mpeg",
    "opus": "audio/opus",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
#: Seconds of (silent) speech made per input character, and the chunk size it is streamed in.
SECONDS_PER_CHARACTER = 0.05
SPEECH_CHUNK = 4096


def duration_of(data: bytes) -> float | None:
    """The audio's length in seconds, read from its header; None if unreadable."""
    if data[:4] == b"RIFF":
        try:
            with wave.open(io.BytesIO(data)) as w:
                return w.getnframes() / w.getframerate()
        except (wave.Error, EOFError):
            return None
    try:
        found = mutagen.File(io.BytesIO(data))
    except Exception:  # noqa: BLE001 - a damaged file is unreadable, whatever mutagen raises
        return None
    length = getattr(getattr(found, "info", None), "length", None)
    return float(length) if isinstance(length, int | float) and length > 0 else None


def _form(api_key: str | None, raw: bytes, headers: dict[str, str]) -> tuple[dict[str, str], bytes, str]:
    if api_key is not None and headers.get("authorization") != f"Bearer {api_key}":
        raise _Reject(401, error_body("Incorrect API key provided", "invalid_request_error", "invalid_api_key"))
    kind, _, options = headers.get("content-type", "").partition(";")
    boundary = options.strip().removeprefix("boundary=").strip('"')
    if kind.strip() != "multipart/form-data" or not boundary:
        raise _bad("Expected a multipart/form-data body.")
    if headers.get("content-length") != str(len(raw)):
        raise _bad("The content-length does not match the body.")
    fields: dict[str, str] = {}
    file: tuple[bytes, str] | None = None
    for part in MultipartParser(
        io.BytesIO(raw), boundary, content_length=len(raw), spool_limit=2**27, memory_limit=2**27
    ):
        if part.filename is not None:
            file = (part.raw, part.filename)
        elif part.name in fields and part.name.endswith("[]"):
            fields[part.name] += "," + part.value
        else:
            fields[part.name] = part.value
    if file is None:
        raise _bad("Missing required parameter: 'file'.", "file")
    if "model" not in fields:
        raise _bad("Missing required parameter: 'model'.", "model")
    return fields, file[0], file[1]


def _subtitles(text: str, seconds: float, vtt: bool) -> str:
    end = f"00:00:{min(seconds, 59.999):06.3f}"
    if vtt:
        return f"WEBVTT\n\n00:00:00.000 --> {end}\n{text}\n"
    return f"1\n00:00:00,000 --> {end.replace('.', ',')}\n{text}\n"


async def handle_transcription(
    api_key: str | None, path: str, raw: bytes, headers: dict[str, str], send: Send, receive: Receive
) -> None:
    """``path``: ``/v1/audio/transcriptions`` or ``/v1/audio/translations``."""
    fields, audio, filename = _form(api_key, raw, headers)
    translate = path.endswith("translations")
    model = fields["model"]
    fmt = fields.get("response_format", "json")
    if fmt not in FORMATS or (model in TOKEN_MODELS and fmt not in ("json", "text")):
        raise _bad(f"response_format '{fmt}' is not compatible with model '{model}'.", "response_format")
    if translate and model in TOKEN_MODELS:
        raise _bad(f"Model '{model}' does not serve translations.", "model")
    prompt, d = _parse_directives(fields.get("prompt", ""))
    await before_answering(d)
    if d.fail is not None:
        raise openai_failure(d.fail, f"fake upstream failure {d.fail}")
    length = duration_of(audio)
    if length is None:
        raise _bad("Audio file might be corrupted or unsupported", "file")
    seconds = math.ceil(round(length, 3))
    verb = "Translated" if translate else "Transcribed"
    text = f"{verb} {seconds} seconds of {filename}."
    if fmt in ("text", "srt", "vtt"):
        body = text + "\n" if fmt == "text" else _subtitles(text, length, fmt == "vtt")
        data = body.encode()
        kind = b"text/plain; charset=utf-8"  # OpenAI sends text, srt and vtt alike as text/plain
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]})
        await send({"type": "http.response.body", "body": data, "more_body": False})
        return
    answer: dict[str, Any] = {"text": text}
    if fmt == "verbose_json":
        answer = {
            "task": "translate" if translate else "transcribe",
            "language": "english" if translate else fields.get("language", "english"),
            "duration": round(length, 3),
            "text": text,
            "segments": [{"id": 0, "seek": 0, "start": 0.0, "end": round(length, 3), "text": text}],
        }
    if model in TOKEN_MODELS:
        audio_tokens, text_tokens, output = seconds * AUDIO_TOKENS_PER_SECOND, len(tokens(prompt)), len(tokens(text))
        answer["usage"] = {
            "type": "tokens",
            "input_tokens": audio_tokens + text_tokens,
            "input_token_details": {"audio_tokens": audio_tokens, "text_tokens": text_tokens},
            "output_tokens": output,
            "total_tokens": audio_tokens + text_tokens + output,
        }
        if fields.get("stream") == "true":
            await _stream_transcript(answer, d, send, receive)
            return
    elif not translate:
        answer["usage"] = {"type": "duration", "seconds": seconds}
    await _send_json(send, 200, answer)


async def _stream_transcript(answer: dict[str, Any], d: _Directives, send: Send, receive: Receive) -> None:
    """``answer`` as OpenAI streams it: a delta event per word, then the done event with the usage;
    each after ``[[chunk-delay:MS]]``, the connection broken after ``[[drop-after:N]]`` events."""
    words = tokens(answer["text"])
    events: list[dict[str, Any]] = [{"type": "transcript.text.delta", "delta": word} for word in words]
    events.append({"type": "transcript.text.done", "text": answer["text"], "usage": answer["usage"]})
    start = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
    await send(start)
    for index, event in enumerate(events):
        if d.chunk_delay_ms:
            await asyncio.sleep(d.chunk_delay_ms / 1000)
        if d.drop_after is not None and index >= d.drop_after:
            await _drop(send, receive)
            return
        frame = b"data: " + msgspec.json.encode(event) + b"\n\n"
        await send({"type": "http.response.body", "body": frame, "more_body": True})
        await asyncio.sleep(0)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def speech_audio(characters: int) -> bytes:
    """A WAV of silence as long as ``characters`` of speech (8 kHz, 16-bit mono)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\0\0" * int(8000 * SECONDS_PER_CHARACTER * characters))
    return buffer.getvalue()


async def handle_speech(api_key: str | None, raw: bytes, headers: dict[str, str], send: Send, receive: Receive) -> None:
    req = openai_request(api_key, raw, headers)
    if not isinstance(req, dict) or not isinstance(req.get("model"), str):
        raise _bad("you must provide a model parameter", "model")
    text = req.get("input")
    if not isinstance(text, str) or not text:
        raise _bad("Missing required parameter: 'input'.", "input")
    if len(text) > 4096:
        raise _bad("'input' is too long: at most 4096 characters.", "input")
    if not isinstance(req.get("voice"), str):
        raise _bad("Missing required parameter: 'voice'.", "voice")
    fmt = req.get("response_format", "mp3")
    if fmt not in SPEECH_TYPES:
        raise _bad(f"Invalid response_format '{fmt}'.", "response_format")
    _, d = _parse_directives(text)
    await before_answering(d)
    if d.fail is not None:
        raise openai_failure(d.fail, f"fake upstream failure {d.fail}")
    audio = speech_audio(len(text))
    start = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", SPEECH_TYPES[fmt].encode())]}
    await send(start)
    for index, offset in enumerate(range(0, len(audio), SPEECH_CHUNK)):
        if d.drop_after is not None and index >= d.drop_after:
            await _drop(send, receive)
            return
        await send({"type": "http.response.body", "body": audio[offset : offset + SPEECH_CHUNK], "more_body": True})
        await asyncio.sleep(d.chunk_delay_ms / 1000)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def speech_request(body: dict[str, Any]) -> bytes:
    """A speech request's JSON, as a test sends it raw."""
    return msgspec.json.encode(body)
