"""The streaming multipart/form-data reader (app/http/multipart.py): bodies encoded by httpx (the
openai SDK's own encoder), read in chunks of every size, bounded, and sent on byte-exact."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterable

import httpx
import pytest

from app.errors import InvalidRequest, RequestTooLarge
from app.http.multipart import Form, FormFile, FormLimits, parse_form

LIMITS = FormLimits(max_parts=8, max_field_bytes=1024, max_file_bytes=4 * 1024 * 1024)


def _encoded(data: dict[str, str | list[str]], files: list[tuple[str, tuple[str, bytes, str]]]) -> tuple[str, bytes]:
    request = httpx.Request("POST", "http://x/", data=data, files=files)
    return request.headers["content-type"], request.read()


class _Body:
    """A body's chunks, counting how many were taken (a refused body is read no further)."""

    def __init__(self, raw: bytes, size: int) -> None:
        self.chunks = [raw[i : i + size] for i in range(0, len(raw), size)]
        self.taken = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.taken += 1
            yield chunk


def _parse(content_type: str | None, raw: bytes, size: int = 65536, limits: FormLimits = LIMITS) -> Form:
    return asyncio.run(parse_form(content_type, _Body(raw, size).__aiter__(), limits))


async def _joined(chunks: AsyncIterator[bytes]) -> bytes:
    return b"".join([chunk async for chunk in chunks])


def _text_parts(form: Form) -> Iterable[tuple[str, str]]:
    return [(p.name, p.value) for p in form.parts if not isinstance(p, FormFile)]


@pytest.mark.parametrize("size", [3, 4096, 1 << 20])
def test_fields_and_files_read_in_chunks_of_any_size(size: int) -> None:
    audio = os.urandom(30_000 if size < 100 else 300_000)
    content_type, raw = _encoded(
        {"model": "whisper-1", "timestamp_granularities[]": ["word", "segment"], "prompt": "héllo"},
        [("file", ("talk.wav", audio, "audio/wav"))],
    )
    with _parse(content_type, raw, size) as form:
        assert form.value("model") == "whisper-1"
        assert form.values("timestamp_granularities[]") == ["word", "segment"]
        assert form.value("prompt") == "héllo"
        upload = form.file("file")
        assert upload is not None
        assert (upload.filename, upload.content_type, upload.size) == ("talk.wav", "audio/wav", len(audio))
        assert b"".join(upload.chunks(1000)) == audio
        assert upload.head(4) == audio[:4]


def test_a_large_file_goes_to_disk_not_memory() -> None:
    big = os.urandom(3 * 1024 * 1024)
    content_type, raw = _encoded({"model": "m"}, [("file", ("a.mp3", big, "audio/mpeg"))])
    with _parse(content_type, raw) as form:
        upload = form.file("file")
        assert upload is not None
        assert upload.spool._rolled  # type: ignore[attr-defined]  # SpooledTemporaryFile moved to disk
        assert b"".join(upload.chunks()) == big


def test_encode_sends_the_same_form_with_its_exact_length() -> None:
    audio = os.urandom(200_000)
    content_type, raw = _encoded(
        {"model": "alias", "language": "fr"}, [("file", ('we"ird\nname.wav', audio, "audio/wav"))]
    )
    with _parse(content_type, raw) as form:
        renamed = form.with_value("model", "whisper-1")
        encoded = renamed.encode()
        sent = asyncio.run(_joined(encoded.chunks))
        assert len(sent) == encoded.length
        again = _parse(encoded.content_type, sent)
        assert list(_text_parts(again)) == [("model", "whisper-1"), ("language", "fr")]
        upload = again.file("file")
        assert upload is not None
        assert b"".join(upload.chunks()) == audio
        assert upload.filename == form.file("file").filename == 'we"ird\nname.wav'  # type: ignore[union-attr]
        again.close()
        # sent a second time (a failover), it starts again from the first byte
        assert asyncio.run(_joined(renamed.encode().chunks))[-len(audio) - 100 :].count(audio[-50:]) == 1


def test_too_many_parts_is_400_and_reading_stops() -> None:
    content_type, raw = _encoded({f"f{i}": "x" * 100 for i in range(50)}, [("file", ("a", b"a", "audio/wav"))])
    body = _Body(raw, 200)
    with pytest.raises(InvalidRequest, match="too many parts: this gateway takes at most 8") as caught:
        asyncio.run(parse_form(content_type, body.__aiter__(), LIMITS))
    assert caught.value.status == 400
    assert body.taken < len(body.chunks)


def test_a_file_over_the_limit_is_413_and_reading_stops() -> None:
    content_type, raw = _encoded({"model": "m"}, [("file", ("a.wav", b"\0" * (5 * 1024 * 1024), "audio/wav"))])
    body = _Body(raw, 65536)
    with pytest.raises(RequestTooLarge, match="The file 'file' is larger than this endpoint takes: at most 4194304"):
        asyncio.run(parse_form(content_type, body.__aiter__(), LIMITS))
    assert body.taken <= 4 * 1024 * 1024 // 65536 + 2


def test_a_long_field_is_413() -> None:
    content_type, raw = _encoded({"prompt": "x" * 2000}, [("file", ("a", b"a", "audio/wav"))])
    with pytest.raises(RequestTooLarge, match="form field 'prompt' is longer than this gateway takes: at most 1024"):
        _parse(content_type, raw)


@pytest.mark.parametrize(
    ("content_type", "raw", "problem"),
    [
        ("application/json", b"{}", "takes a multipart/form-data body"),
        (None, b"", "content-type is missing"),
        ("multipart/form-data", b"", "names no boundary"),
        ("multipart/form-data; boundary=abc", b"--abc\r\nContent-Disposition: form-data; name=a\r\n\r\nx", "could not"),
        (
            "multipart/form-data; boundary=abc",
            b"--abc\r\nContent-Type: text/plain\r\n\r\nx\r\n--abc--\r\n",
            "form-data",
        ),
        (
            "multipart/form-data; boundary=abc",
            b'--abc\r\nContent-Disposition: form-data; name="a"\r\n\r\n\xff\xfe\r\n--abc--\r\n',
            "not valid UTF-8",
        ),
    ],
)
def test_malformed_bodies_are_400(content_type: str | None, raw: bytes, problem: str) -> None:
    with pytest.raises(InvalidRequest, match=problem) as caught:
        _parse(content_type, raw)
    assert caught.value.status == 400
