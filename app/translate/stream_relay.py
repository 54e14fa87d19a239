"""An upstream's stream as the client's frames: what the relay (``app/http/relay.py``) asks of a codec.

A :class:`StreamRelay` takes the upstream's events one by one and answers the frames to send for
each (possibly none: what must wait for the charge) and the canonical events it carried (the text,
tool calls and usage reports that a stream's bill is made from). Two kinds exist:

- :class:`CanonicalRelay`: the upstream's events decoded, read as canonical events by the upstream
  wire's reader, and written as the client's frames by the client protocol's writer — translation,
  and a pass-through that rewrites whole events (the Responses API's);
- the same-wire relays of ``chat/passthrough.py`` and ``messages/passthrough.py``, which send the
  upstream's event bytes on as they came, changing only what Tollgate must (the model's name).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from app.errors import GatewayError
from app.translate import canonical as c
from app.upstream.base import StreamEvent
from domain.usage import TokenUsage


class EventReader(Protocol):
    def events(self, raw: dict[str, Any]) -> list[c.Event]: ...


class StreamWriter(Protocol):
    """The client's frames: the upstream's event as it came (``raw``) and as canonical ``events``."""

    def start(self) -> list[bytes]: ...
    def write(self, raw: dict[str, Any], events: list[c.Event]) -> list[bytes]: ...
    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]: ...
    def error(self, exc: GatewayError) -> list[bytes]: ...


class Relayed(NamedTuple):
    """What a batch of the upstream's events became: the client's frames, the canonical events the
    bill is made from (text, reasoning, tool calls, usage reports), and the failure that stopped the
    batch early (an event that could not be read), after the frames of those before it."""

    frames: list[bytes]
    events: list[c.Event]
    failure: GatewayError | None = None


class StreamRelay(Protocol):
    def start(self) -> list[bytes]:
        """The frames to send before the upstream's first event."""
        ...

    def relay(self, batch: list[StreamEvent]) -> Relayed:
        """The client's frames for the events one read of the upstream brought."""
        ...

    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]:
        """The final frames, reporting ``usage`` with Tollgate's ``extra_usage`` (the cost). It may
        run more than once (the ledger may decide again), so it changes nothing it reads."""
        ...

    def error(self, exc: GatewayError) -> list[bytes]:
        """The in-stream error that ends a stream that broke."""
        ...


def data_frame(data: bytes, event: bytes = b"") -> bytes:
    """An event with ``data`` as its data (as an SSE reader joins it again: a data line per line of
    it), named ``event`` if given."""
    lines = b"data: " + (data.replace(b"\n", b"\ndata: ") if b"\n" in data else data) + b"\n\n"
    return b"event: " + event + b"\n" + lines if event else lines


def relay_each(
    batch: list[StreamEvent], relay_one: Callable[[StreamEvent], tuple[list[bytes], list[c.Event]]]
) -> Relayed:
    """A batch relayed event by event, until one cannot be read."""
    frames: list[bytes] = []
    events: list[c.Event] = []
    for event in batch:
        try:
            out, read = relay_one(event)
        except GatewayError as exc:
            return Relayed(frames, events, exc)
        frames += out
        events += read
    return Relayed(frames, events)


class CanonicalRelay:
    """An upstream's events decoded and read as canonical events by ``reader``; the client's frames
    written by ``writer``. ``pure_finish``: the writer's ``finish`` changes nothing, so it need not
    run on a copy."""

    __slots__ = ("_pure_finish", "_reader", "_writer")

    def __init__(self, reader: EventReader, writer: StreamWriter, *, pure_finish: bool = False) -> None:
        self._reader = reader
        self._writer = writer
        self._pure_finish = pure_finish

    def start(self) -> list[bytes]:
        return self._writer.start()

    def relay(self, batch: list[StreamEvent]) -> Relayed:
        return relay_each(batch, self._relay_one)

    def _relay_one(self, event: StreamEvent) -> tuple[list[bytes], list[c.Event]]:
        raw = event.object()
        if raw is None:
            return [], []  # not a JSON object: nothing any wire sends, skipped
        events = self._reader.events(raw)
        content: list[c.Event] = [e for e in events if not isinstance(e, c.UsageReported)]
        return self._writer.write(raw, content), events

    def finish(self, usage: TokenUsage, reasoning_tokens: int, extra_usage: dict[str, Any]) -> list[bytes]:
        writer = self._writer if self._pure_finish else copy.deepcopy(self._writer)
        return writer.finish(usage, reasoning_tokens, extra_usage)

    def error(self, exc: GatewayError) -> list[bytes]:
        return self._writer.error(exc)
