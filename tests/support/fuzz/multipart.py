"""Multipart request bodies (uploads: audio to transcribe, images to edit, batch input files), from
valid to hostile, as raw bytes with the ``content-type`` header they are sent with.

Each body starts as a valid form of its endpoint and is then bent: fields dropped, repeated or set
to values of the wrong kind (huge or negative numbers, NUL and line breaks, invalid UTF-8); parts
with no name, names and file names holding quotes, line breaks, NULs or 10,000 characters, unknown
part headers; the file itself replaced by bytes of no format, a header cut short, or nothing; and
the framing damaged: a boundary the header does not announce, or announced twice, a body cut off
mid-part, no closing boundary, bare line feeds for CRLF, preamble and epilogue, thousands of parts.
"""

from __future__ import annotations

import io
import struct
import wave
from dataclasses import dataclass

from hypothesis import strategies as st


@dataclass(frozen=True)
class Part:
    """One part of a form: a field (``filename`` None) or a file."""

    name: bytes
    content: bytes
    filename: bytes | None = None
    content_type: bytes | None = None
    extra_headers: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class Form:
    """A whole request body and the content type that announces it."""

    body: bytes
    content_type: bytes  # bytes: a boundary need not be ASCII to be sent


def wav(seconds: float = 1.0, rate: int = 8000) -> bytes:
    """A valid mono 16-bit PCM WAV file of ``seconds`` of silence."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\x00\x00" * int(seconds * rate))
    return buffer.getvalue()


def png(width: int = 2, height: int = 2) -> bytes:
    """The start of a PNG file (its signature and IHDR chunk, CRC unchecked by anything here)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + b"\x00\x00\x00\x00"


def encode(parts: list[Part], boundary: bytes, *, newline: bytes = b"\r\n", close: bool = True) -> bytes:
    """The parts framed by ``boundary`` (``close``: with the closing delimiter)."""
    out = bytearray()
    for part in parts:
        out += b"--" + boundary + newline
        disposition = b'form-data; name="' + part.name + b'"'
        if part.filename is not None:
            disposition += b'; filename="' + part.filename + b'"'
        out += b"Content-Disposition: " + disposition + newline
        if part.content_type is not None:
            out += b"Content-Type: " + part.content_type + newline
        for header in part.extra_headers:
            out += header + newline
        out += newline + part.content + newline
    if close:
        out += b"--" + boundary + b"--" + newline
    return bytes(out)


HOSTILE_TEXT = st.sampled_from(
    [
        b"",
        b"\x00",
        b"evil\x00name",
        b"a\r\nContent-Type: text/html",
        b'quote"d',
        b"\xff\xfe\xfd",
        "网络".encode(),
        b"x" * 10_000,
        b"../../etc/passwd",
        b"-1",
        b"1e309",
        b"NaN",
        b"99999999999999999999999999",
        b"true",
        b"null",
        b'{"a": [1, 2]}',
    ]
)
HOSTILE_FILES = st.one_of(
    st.binary(max_size=256),
    st.sampled_from([b"", b"RIFF", b"RIFF\xff\xff\xff\xffWAVEfmt ", b"ID3\x04\x00\x00\x00\x00\x00\x00", b"\x89PNG"]),
    st.builds(lambda data, cut: data[:cut], st.just(wav(0.5)), st.integers(0, 60)),
)


@st.composite
def _bent_part(draw: st.DrawFn, part: Part) -> Part:
    """One part, perhaps bent."""
    choice = draw(st.integers(0, 6))
    if choice == 0:
        return part
    if choice == 1:  # the value
        return Part(part.name, draw(HOSTILE_FILES if part.filename is not None else HOSTILE_TEXT), part.filename)
    if choice == 2:  # the name
        return Part(draw(HOSTILE_TEXT), part.content, part.filename, part.content_type)
    if choice == 3:  # the file name, or a field turned into a file
        return Part(part.name, part.content, draw(HOSTILE_TEXT), part.content_type)
    if choice == 4:  # the content type
        return Part(part.name, part.content, part.filename, draw(HOSTILE_TEXT))
    if choice == 5:  # unknown or repeated part headers
        extra = draw(st.sampled_from([b"X-Junk: 1", b"Content-Disposition: attachment", b"Content-Length: -5", b":"]))
        return Part(part.name, part.content, part.filename, part.content_type, (extra,))
    return Part(part.name, part.content, None, part.content_type)  # a file sent as a field


@st.composite
def forms(draw: st.DrawFn, valid: list[Part]) -> Form:
    """A form of the endpoint whose valid form is ``valid``: as it is, or bent in its parts or framing."""
    parts = [draw(_bent_part(part)) for part in valid if draw(st.integers(0, 9)) > 0]  # each dropped 1 in 10
    if draw(st.booleans()):  # a repeated or unknown part
        extra = draw(st.sampled_from([*valid, Part(b"junk", b"1"), Part(b"", b"")]))
        parts.insert(draw(st.integers(0, len(parts))), extra)
    if draw(st.integers(0, 19)) == 0:  # thousands of tiny parts
        parts += [Part(b"n", b"1")] * draw(st.integers(1000, 5000))
    boundary = draw(st.sampled_from([b"tollgateBoundary7MA4YWxk", b"a", b"x" * 70, b"with space", b"--", b"\xff"]))
    body = encode(
        parts,
        boundary,
        newline=draw(st.sampled_from([b"\r\n", b"\r\n", b"\n"])),
        close=draw(st.integers(0, 9)) > 0,
    )
    framing = draw(st.integers(0, 9))
    if framing == 0:  # cut off mid-way
        body = body[: draw(st.integers(0, max(len(body) - 1, 0)))]
    elif framing == 1:  # a preamble and an epilogue
        body = b"preamble\r\n" + body + b"epilogue"
    announced = boundary.decode("latin-1")
    header = draw(
        st.sampled_from(
            [
                f"multipart/form-data; boundary={announced}",
                f'multipart/form-data; boundary="{announced}"',
                "multipart/form-data",
                "multipart/form-data; boundary=other",
                f"multipart/form-data; boundary={announced}; boundary=second",
                "application/json",
                "multipart/mixed; boundary=" + announced,
            ]
        )
    )
    if draw(st.integers(0, 3)) > 0:  # mostly the header that fits
        header = f"multipart/form-data; boundary={announced}"
    return Form(body, header.encode("latin-1"))
