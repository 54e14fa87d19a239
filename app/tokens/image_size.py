"""An image's width and height, read from the header of its PNG, JPEG, GIF or WebP bytes.

Providers price images by their pixel size, so counting a prompt needs the size, not the base64
text. Only the header is decoded (the first few kilobytes; a JPEG's size comes after its metadata
segments, so for a JPEG more is decoded until the frame header is found). Anything unreadable gives
``None``, which the counting rules treat as the largest image the provider accepts.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct

Size = tuple[int, int]

_DATA_URL = re.compile(r"^data:[\w.+-]+/[\w.+-]+;base64,", re.DOTALL)
_HEAD_CHARS = 4096  # base64 characters decoded first: 3 KB, enough for PNG, GIF, WebP and most JPEGs
#: JPEG start-of-frame markers (they carry the size); C4 (DHT), C8 and CC are not frames.
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def size_of_data_url(url: str) -> Size | None:
    """The size of a ``data:image/...;base64,`` URL's image, or None (not a data URL, or unreadable)."""
    match = _DATA_URL.match(url)
    return size_of_base64(url[match.end() :]) if match else None


def size_of_base64(data: str) -> Size | None:
    head = _decode(data[:_HEAD_CHARS])
    if head is None:
        return None
    size = image_size(head)
    if size is None and head.startswith(b"\xff\xd8") and len(data) > _HEAD_CHARS:
        whole = _decode(data)  # a JPEG whose metadata pushed the frame header further in
        size = image_size(whole) if whole is not None else None
    return size


def _decode(text: str) -> bytes | None:
    text = "".join(text.split()) if any(ch.isspace() for ch in text[:80]) else text
    text = text[: len(text) // 4 * 4]
    try:
        return base64.b64decode(text)
    except (binascii.Error, ValueError):
        return None


def image_size(data: bytes) -> Size | None:
    """Width and height from a PNG, GIF, WebP or JPEG header; None if unknown or implausible."""
    size: tuple[int, ...] | None
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR" and len(data) >= 24:
        size = struct.unpack(">II", data[16:24])
    elif data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        size = struct.unpack("<HH", data[6:10])
    elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        size = _webp_size(data)
    elif data.startswith(b"\xff\xd8"):
        size = _jpeg_size(data)
    else:
        return None
    if size is None or size[0] <= 0 or size[1] <= 0:
        return None
    return int(size[0]), int(size[1])


def _webp_size(data: bytes) -> Size | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        return (int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1)
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return ((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return (width & 0x3FFF, height & 0x3FFF)
    return None


def _jpeg_size(data: bytes) -> Size | None:
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, 0xD8) or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image, or start of scan before any frame header
            return None
        length = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if marker in _SOF:
            if i + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return (width, height)
        i += 2 + length
    return None
