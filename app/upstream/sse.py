"""Reading server-sent events: just enough of the format to relay provider streams."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator


async def iter_sse_data(lines: AsyncIterable[str]) -> AsyncIterator[str]:
    """Yield the ``data`` of each event (multi-line data joined with ``\\n``); comments are skipped."""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value.removeprefix(" "))
    if data:
        yield "\n".join(data)
