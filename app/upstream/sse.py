"""Reading server-sent events: just enough of the format to relay provider streams, on bytes.

A provider's stream arrives in reads of any size: an event may be split across reads, and one read
may bring many events (a provider's burst, or a busy gateway that finds several waiting). The
parser takes the reads as they come and hands back the data of every event they completed, as the
bytes the provider sent: nothing is decoded here, so a relay that passes an event on as it came
never pays for turning it into text and back.
"""

from __future__ import annotations

_DATA = b"data: "


class SSEParser:
    """The ``data`` of each complete event (multi-line data joined with ``\\n``), from the reads of
    a byte stream. Lines may end in ``\\n``, ``\\r\\n`` or ``\\r``; comments and fields other than
    ``data`` are skipped, and so are events without data."""

    __slots__ = ("_cr", "_pending")

    def __init__(self) -> None:
        self._pending = b""
        self._cr = False  # the last read ended in \r: maybe the first half of a \r\n

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of the events ``chunk`` completed, in order."""
        if self._cr:
            chunk = b"\r" + chunk
            self._cr = False
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):
                self._cr = True
                chunk = chunk[:-1]
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if self._pending:
            chunk = self._pending + chunk
        end = chunk.rfind(b"\n\n")
        if end < 0:
            self._pending = chunk
            return []
        done, self._pending = chunk[:end], chunk[end + 2 :]
        blocks = done.split(b"\n\n")
        lines, count = done.count(b"\n"), len(blocks)
        if lines == 2 * (count - 1) and (b"\n\n" + done).count(b"\n\ndata: ") == count:
            return [block[6:] for block in blocks]  # every event one data line (OpenAI's)
        if (
            lines == 3 * count - 2
            and (b"\n\n" + done).count(b"\n\nevent: ") == count
            and done.count(b"\ndata: ") == count
        ):  # an event line, then a data line (Anthropic's)
            return [block[block.index(b"\ndata: ") + 7 :] for block in blocks]
        found = []
        for block in blocks:
            data = event_data(block)
            if data is not None:
                found.append(data)
        return found

    def end(self) -> list[bytes]:
        """The last event, if the stream ended without the blank line that closes it."""
        data = event_data(self._pending)
        self._pending = b""
        return [] if data is None else [data]


def event_data(block: bytes) -> bytes | None:
    """The data of one event (its lines, ``\\n``-separated), or None if it has none."""
    if block.startswith(_DATA) and b"\n" not in block:
        return block[6:]  # the common case: one data line
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        field, _, value = line.partition(b":")
        if field == b"data":
            data.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(data) if data else None
