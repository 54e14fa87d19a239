"""Images and documents between protocols: data URLs ↔ base64 blocks, and URLs as they are."""

from __future__ import annotations

import re

from app.errors import InvalidRequest
from app.translate.canonical import File, Image

_DATA_URL = re.compile(r"^data:(?P<type>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.DOTALL)
SUPPORTED_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def image_from_data_url(url: str) -> Image:
    match = _DATA_URL.match(url)
    if match:
        return Image(media_type=match.group("type"), data=match.group("data"))
    if url.startswith(("http://", "https://")):
        return Image(url=url)
    raise InvalidRequest("Invalid image URL: expected an http(s) URL or a base64 data URL.")


def image_to_url(image: Image) -> str:
    if image.url:
        return image.url
    return f"data:{image.media_type};base64,{image.data}"


def file_from_data_url(url: str, filename: str | None = None) -> File:
    match = _DATA_URL.match(url)
    if match:
        return File(media_type=match.group("type"), data=match.group("data"), filename=filename)
    if url.startswith(("http://", "https://")):
        return File(url=url, filename=filename)
    raise InvalidRequest("Invalid file: expected a base64 data URL or an http(s) URL.")


def file_to_data_url(document: File) -> str:
    return f"data:{document.media_type or 'application/pdf'};base64,{document.data}"
