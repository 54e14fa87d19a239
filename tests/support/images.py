"""Real image headers of a chosen size, for counting tests (no imaging library needed).

The PNG and GIF are complete, valid files; the JPEG and WebP files carry a complete, valid header
(markers and chunks as an encoder writes them) before a stub of image data, which is all a size
reader looks at.
"""

from __future__ import annotations

import base64
import struct
import zlib


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x00" * width for _ in range(height))  # filter 0, one grey byte a pixel
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def gif(width: int, height: int) -> bytes:
    return (
        b"GIF89a"
        + struct.pack("<HHBBB", width, height, 0, 0, 0)
        + b","
        + struct.pack("<HHHHB", 0, 0, width, height, 0)
        + b"\x02\x02\x44\x01\x00;"
    )


def jpeg(width: int, height: int, exif_bytes: int = 0) -> bytes:
    """SOI, JFIF APP0, optionally a large APP1 (metadata before the frame header), DQT, SOF0, DHT, SOS."""

    def segment(marker: int, payload: bytes) -> bytes:
        return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload

    out = b"\xff\xd8" + segment(0xE0, b"JFIF\x00\x01\x01\x01\x00H\x00H\x00\x00")
    if exif_bytes:
        out += segment(0xE1, b"Exif\x00\x00" + b"\x00" * exif_bytes)
    out += segment(0xDB, b"\x00" + bytes(range(1, 65)))
    out += segment(0xC0, struct.pack(">BHHB", 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01")
    out += segment(0xC4, b"\x00" + b"\x00" * 16)
    out += segment(0xDA, b"\x03\x01\x00\x02\x11\x03\x11\x00\x3f\x00") + b"\x00" * 32 + b"\xff\xd9"
    return out


def webp_vp8x(width: int, height: int) -> bytes:
    body = b"WEBP" + b"VP8X" + struct.pack("<I", 10) + b"\x00\x00\x00\x00"
    body += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", len(body)) + body


def webp_lossless(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    data = b"\x2f" + struct.pack("<I", bits) + b"\x00" * 8
    body = b"WEBP" + b"VP8L" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def webp_lossy(width: int, height: int) -> bytes:
    data = b"\x00\x00\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", width, height) + b"\x00" * 8
    body = b"WEBP" + b"VP8 " + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def data_url(image: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{base64.b64encode(image).decode()}"
