"""A multipart/form-data request body, read as it arrives and re-sent upstream as a stream.

The endpoints that take uploads (``/v1/audio/transcriptions``, ``/v1/audio/translations``,
``/v1/images/edits``) receive files of tens of megabytes. Read whole, each would sit in the
gateway's memory twice (the body, then the parsed part) for as long as the upstream takes. Here the
body is read chunk by chunk from the socket (``Request.stream``, which keeps ``max_request_bytes``),
fed to ``multipart``'s push parser (the parser Litestar itself depends on: sans-I/O, bounded,
kept by the author of Bottle; a boundary scanner of our own would be one more parser of hostile
input to maintain), and each file part is written to a spooled temporary file (in memory up
to :data:`SPOOL_BYTES`, on disk beyond), so memory stays flat whatever the upload's size.

Every bound is checked while the body streams in, before the rest of it is read:

- more than ``max_form_parts`` parts: 400;
- a text field longer than ``max_form_field_bytes``: 413;
- a file longer than the endpoint's file limit (at most ``max_upload_bytes``): 413;
- a body that is not multipart/form-data, breaks off, or is malformed: 400.

Each answer is in OpenAI's error shape (the uploads are OpenAI endpoints), naming the field. What
the route reads is a :class:`Form`: its text fields and files in the order they came, which
:meth:`Form.encode` sends on as a fresh multipart body (a boundary of its own, the exact
``content-length`` known beforehand, the files read back a chunk at a time), as often as a failover
needs. A :class:`Form` owns its temporary files: close it (it is a context manager) when the request
is done.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from tempfile import SpooledTemporaryFile
from typing import IO, Any

from litestar import Request
from multipart import MultipartError, MultipartSegment, ParserLimitReached, PushMultipartParser

from app.errors import InvalidRequest, RequestTooLarge
from domain.settings import Settings

#: A file part stays in memory up to this many bytes, then moves to a temporary file on disk.
SPOOL_BYTES = 1024 * 1024
#: The size of the chunks a file is read back in, to re-send it.
CHUNK_BYTES = 64 * 1024
#: The largest header line of one part, and how many headers a part may have: RFC 7578 allows three
#: (Content-Disposition, Content-Type, Content-Transfer-Encoding); clients add a few of their own.
_PART_HEADER_BYTES = 4096 + 128
_PART_HEADERS = 16


@dataclass(frozen=True, slots=True)
class FormLimits:
    """What one multipart body may hold: its parts, a text field's size, a file's size (bytes)."""

    max_parts: int
    max_field_bytes: int
    max_file_bytes: int

    @classmethod
    def of(cls, settings: Settings, file_limit: int | None = None) -> FormLimits:
        """The configured limits; ``file_limit``: an endpoint's own, lower limit on a file (OpenAI
        takes 25 MB of audio), never above ``max_upload_bytes``."""
        most = settings.max_upload_bytes if file_limit is None else min(file_limit, settings.max_upload_bytes)
        return cls(settings.max_form_parts, settings.max_form_field_bytes, most)


@dataclass(frozen=True, slots=True)
class FormField:
    """A text part: its name and its value, decoded as UTF-8."""

    name: str
    value: str


@dataclass(eq=False, slots=True)
class FormFile:
    """A file part, its bytes in a spooled temporary file the :class:`Form` owns."""

    name: str
    filename: str
    content_type: str
    size: int
    spool: IO[bytes]

    def head(self, size: int) -> bytes:
        """The file's first ``size`` bytes (for a format's magic number)."""
        self.spool.seek(0)
        return self.spool.read(size)

    def chunks(self, size: int = CHUNK_BYTES) -> Iterator[bytes]:
        """The file's bytes from the start, a chunk at a time; each read seeks first, so two readers
        (a failed attempt's and the next one's) never move each other's place."""
        position = 0
        while True:
            self.spool.seek(position)
            chunk = self.spool.read(size)
            if not chunk:
                return
            position += len(chunk)
            yield chunk

    def opened(self) -> IO[bytes]:
        """The spool itself, rewound: for a library that reads a file object (a media header)."""
        self.spool.seek(0)
        return self.spool


Part = FormField | FormFile


@dataclass(frozen=True, slots=True)
class EncodedForm:
    """A form as a multipart body to send: its ``content-type`` (with the boundary), its exact
    length, and its bytes as they are read (:meth:`Form.encode`)."""

    content_type: str
    length: int
    chunks: AsyncIterator[bytes]


@dataclass(eq=False)
class Form:
    """A multipart/form-data body's parts, in their order. Close it to delete its files."""

    parts: list[Part] = field(default_factory=list)

    def value(self, name: str) -> str | None:
        """The last text field called ``name`` (as most form readers take it), or None."""
        found = None
        for part in self.parts:
            if isinstance(part, FormField) and part.name == name:
                found = part.value
        return found

    def values(self, name: str) -> list[str]:
        """Every text field called ``name``, in order (``timestamp_granularities[]``, ``image[]``)."""
        return [part.value for part in self.parts if isinstance(part, FormField) and part.name == name]

    def file(self, name: str) -> FormFile | None:
        """The first file part called ``name``, or None."""
        for part in self.parts:
            if isinstance(part, FormFile) and part.name == name:
                return part
        return None

    def files(self, name: str) -> list[FormFile]:
        return [part for part in self.parts if isinstance(part, FormFile) and part.name == name]

    def names(self) -> set[str]:
        return {part.name for part in self.parts}

    def with_value(self, name: str, value: str) -> Form:
        """The same parts with the text field ``name`` set to ``value`` (every field of that name
        replaced by one, where the first was; added at the end if there was none): the upstream's
        own model id, for one. The files are shared, not copied: close only the original."""
        parts: list[Part] = []
        placed = False
        for part in self.parts:
            if isinstance(part, FormField) and part.name == name:
                if not placed:
                    parts.append(FormField(name, value))
                    placed = True
                continue
            parts.append(part)
        if not placed:
            parts.append(FormField(name, value))
        return Form(parts)

    def encode(self, boundary: str | None = None) -> EncodedForm:
        """The form as a new multipart body, with a random boundary no part can guess (or ``boundary``:
        the same body again, byte for byte); its length is computed first, so the upstream gets a
        ``content-length`` and no chunked encoding."""
        boundary = boundary or secrets.token_hex(16)
        heads = [_part_head(boundary, part) for part in self.parts]
        tail = f"--{boundary}--\r\n".encode()
        length = len(tail)
        for head, part in zip(heads, self.parts, strict=True):
            body = part.size if isinstance(part, FormFile) else len(part.value.encode())
            length += len(head) + body + 2
        return EncodedForm(f"multipart/form-data; boundary={boundary}", length, self._chunks(heads, tail))

    async def _chunks(self, heads: list[bytes], tail: bytes) -> AsyncIterator[bytes]:
        for head, part in zip(heads, self.parts, strict=True):
            if isinstance(part, FormFile):
                yield head
                for chunk in part.chunks():
                    yield chunk
                yield b"\r\n"
            else:
                yield head + part.value.encode() + b"\r\n"
        yield tail

    def digest(self) -> bytes:
        """A SHA-256 of the form's parts (names, values, filenames, types and file bytes, in order):
        what an Idempotency-Key is compared by, whatever boundary the client chose."""
        sha = hashlib.sha256()
        for part in self.parts:
            sha.update(_part_head("-", part))
            if isinstance(part, FormFile):
                for chunk in part.chunks():
                    sha.update(chunk)
            else:
                sha.update(part.value.encode())
        return sha.digest()

    def close(self) -> None:
        for part in self.parts:
            if isinstance(part, FormFile):
                part.spool.close()

    def __enter__(self) -> Form:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _quoted(text: str) -> str:
    """A name or filename in a Content-Disposition parameter, escaped as browsers do (WHATWG)."""
    return text.replace("\r", "%0D").replace("\n", "%0A").replace('"', "%22")


def _part_head(boundary: str, part: Part) -> bytes:
    disposition = f'form-data; name="{_quoted(part.name)}"'
    lines = [f"--{boundary}"]
    if isinstance(part, FormFile):
        lines.append(f'Content-Disposition: {disposition}; filename="{_quoted(part.filename)}"')
        lines.append(f"Content-Type: {part.content_type}")
    else:
        lines.append(f"Content-Disposition: {disposition}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def boundary_of(content_type: str | None) -> str:
    """The boundary of a multipart/form-data ``content-type``, or a 400 that says what was expected."""
    kind, _, options = (content_type or "").partition(";")
    if kind.strip().lower() != "multipart/form-data":
        raise InvalidRequest(
            "This endpoint takes a multipart/form-data body (a file upload); "
            f"the request's content-type is {kind.strip() or 'missing'}."
        )
    for option in options.split(";"):
        key, _, value = option.strip().partition("=")
        if key.strip().lower() == "boundary" and value.strip().strip('"'):
            return value.strip().strip('"')
    raise InvalidRequest("The multipart/form-data content-type names no boundary.")


class _Reader:
    """Collects the parser's events into a :class:`Form`, checking each part's size as it grows."""

    def __init__(self, limits: FormLimits) -> None:
        self.limits = limits
        self.form = Form()
        self._segment: MultipartSegment | None = None
        self._text = bytearray()
        self._spool: IO[bytes] | None = None

    def take(self, event: MultipartSegment | bytes | None) -> None:
        if isinstance(event, MultipartSegment):
            self._start(event)
        elif event is None:
            self._finish()
        else:
            self._add(event)

    def _start(self, segment: MultipartSegment) -> None:
        if segment.name is None or segment.disposition != "form-data":
            raise InvalidRequest("A part of the multipart body has no 'Content-Disposition: form-data; name=...'.")
        self._segment = segment
        if segment.filename is not None:
            self._spool = SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - the Form closes it
        else:
            self._text = bytearray()

    def _add(self, chunk: bytes) -> None:
        segment = self._segment
        assert segment is not None  # the parser sends a segment's head before its body
        if self._spool is not None:
            if segment.bytes_received > self.limits.max_file_bytes:
                raise RequestTooLarge(
                    f"The file '{segment.name}' is larger than this endpoint takes: at most "
                    f"{self.limits.max_file_bytes} bytes.",
                    param=segment.name,
                    headers={"connection": "close"},
                )
            self._spool.write(chunk)
            return
        if segment.bytes_received > self.limits.max_field_bytes:
            raise RequestTooLarge(
                f"The form field '{segment.name}' is longer than this gateway takes: at most "
                f"{self.limits.max_field_bytes} bytes.",
                param=segment.name,
                headers={"connection": "close"},
            )
        self._text += chunk

    def _finish(self) -> None:
        segment = self._segment
        assert segment is not None
        assert segment.name is not None
        if self._spool is not None:
            spool, self._spool = self._spool, None
            self.form.parts.append(
                FormFile(
                    segment.name,
                    segment.filename or "",
                    segment.content_type or "application/octet-stream",
                    segment.size,
                    spool,
                )
            )
        else:
            try:
                value = self._text.decode()
            except UnicodeDecodeError:
                raise InvalidRequest(
                    f"The form field '{segment.name}' is not valid UTF-8.", param=segment.name
                ) from None
            self.form.parts.append(FormField(segment.name, value))
        self._segment = None

    def abandon(self) -> None:
        if self._spool is not None:
            self._spool.close()
        self.form.close()


async def read_form(request: Request[Any, Any, Any], limits: FormLimits) -> Form:
    """The request's multipart/form-data body, read as it arrives, within ``limits``; a body that
    breaks them is refused (400 or 413) as soon as it does, and nothing of it is kept."""
    return await parse_form(request.headers.get("content-type"), request.stream(), limits)


async def parse_form(content_type: str | None, body: AsyncIterator[bytes], limits: FormLimits) -> Form:
    """:func:`read_form` over any body's chunks."""
    boundary = boundary_of(content_type)
    parser = PushMultipartParser(
        boundary,
        max_header_size=_PART_HEADER_BYTES,
        max_header_count=_PART_HEADERS,
        max_segment_count=limits.max_parts,
        # not strict: strict mode refuses the closing CRLF after the last boundary when it arrives
        # in a chunk of its own, which depends on how the client's bytes were cut, not on the body
        strict=False,
    )
    reader = _Reader(limits)
    try:
        async for chunk in body:
            if not chunk:
                continue
            for event in parser.parse(chunk):
                reader.take(event)
        parser.close()
    except ParserLimitReached as exc:
        reader.abandon()
        raise _limit_error(str(exc), limits) from None
    except MultipartError as exc:
        reader.abandon()
        raise InvalidRequest(f"The multipart/form-data body could not be read: {exc}.") from None
    except BaseException:
        reader.abandon()
        raise
    return reader.form


def _limit_error(problem: str, limits: FormLimits) -> InvalidRequest:
    if problem == "Maximum segment count exceeded":
        return InvalidRequest(
            f"The multipart body has too many parts: this gateway takes at most {limits.max_parts}.",
            headers={"connection": "close"},
        )
    return InvalidRequest(
        f"The multipart/form-data body could not be read: {problem}.", headers={"connection": "close"}
    )
