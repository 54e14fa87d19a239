"""The demo upstream's images: real PNG files made in process, answered in OpenAI's image shape.

Each image is a small square of one colour drawn from the prompt, so the quick start shows an image
being generated and charged with no network and no key. Like dall-e-3, the answer reports no token
usage: the gateway charges it per image, by the size and quality asked (echoed in the answer).
"""

from __future__ import annotations

import base64
import hashlib
import struct
import time
import zlib
from typing import Any

#: The side in pixels of the PNG the demo draws, whatever size was asked (the price is by the size asked).
_SIDE = 64


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def demo_png(prompt: str, index: int) -> bytes:
    """A ``_SIDE``-pixel square PNG of one colour, drawn from the prompt and the image's index."""
    red, green, blue = hashlib.sha256(f"{index}:{prompt}".encode()).digest()[:3]
    row = b"\x00" + bytes((red, green, blue)) * _SIDE
    header = struct.pack(">IIBBBBB", _SIDE, _SIDE, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(row * _SIDE))
        + _chunk(b"IEND", b"")
    )


def demo_images_answer(body: dict[str, Any]) -> dict[str, Any]:
    """The answer to an image request: ``n`` images, as ``b64_json`` or as a ``data:`` URL (the
    demo serves no files), with the size and quality asked when it named them."""
    prompt = body.get("prompt") if isinstance(body.get("prompt"), str) else ""
    asked = body.get("n")
    n = asked if isinstance(asked, int) and not isinstance(asked, bool) else 1
    as_url = body.get("response_format") == "url"
    data = []
    for index in range(max(1, n)):
        encoded = base64.b64encode(demo_png(str(prompt), index)).decode()
        image = {"url": "data:image/png;base64," + encoded} if as_url else {"b64_json": encoded}
        data.append({**image, "revised_prompt": prompt})
    answer: dict[str, Any] = {"created": int(time.time()), "data": data}
    for name in ("size", "quality"):
        if isinstance(body.get(name), str) and body[name] != "auto":
            answer[name] = body[name]
    return answer
