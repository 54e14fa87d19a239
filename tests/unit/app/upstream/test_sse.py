"""Reading an upstream's server-sent events from reads of any size: an event split across reads at
any byte, many events in one read, every line ending SSE allows, comments, several data lines, and
a last event without its blank line all give the same events."""

from __future__ import annotations

import pytest

from app.upstream.sse import SSEParser

EVENTS = [
    (b'data: {"n":1}\n\n', b'{"n":1}'),
    (b'event: content_block_delta\ndata: {"n":2}\n\n', b'{"n":2}'),
    (b": a comment the provider sends to keep the connection open\n\n", None),
    (b'data: {"n":\ndata: 3}\n\n', b'{"n":\n3}'),  # two data lines: joined with \n
    (b'data: {"n":4}\r\n\r\n', b'{"n":4}'),
    (b'data: {"n":5}\r\r', b'{"n":5}'),
    (b'id: 6\ndata:{"n":6}\nretry: 10\n\n', b'{"n":6}'),  # other fields skipped; no space after the colon
    (b'data:  {"n":7}\n\n', b' {"n":7}'),  # only the one space after the colon is taken off
    (b"\n\n", None),  # blank lines between events
    (b"event: ping\n\n", None),  # an event without data
    (b"data: [DONE]\n\n", b"[DONE]"),
]
STREAM = b"".join(raw for raw, _ in EVENTS)
EXPECTED = [data for _, data in EVENTS if data is not None]


def read(pieces: list[bytes]) -> list[bytes]:
    parser = SSEParser()
    found = []
    for piece in pieces:
        found += parser.feed(piece)
    return found + parser.end()


def test_a_stream_read_whole_gives_every_event_s_data() -> None:
    assert read([STREAM]) == EXPECTED


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_an_event_split_across_two_reads_at_any_byte_is_read_whole(cut: int) -> None:
    assert read([STREAM[:cut], STREAM[cut:]]) == EXPECTED


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_reads_of_any_size_give_the_same_events(size: int) -> None:
    assert read([STREAM[i : i + size] for i in range(0, len(STREAM), size)]) == EXPECTED


def test_the_last_event_counts_without_the_blank_line_that_should_close_it() -> None:
    assert read([b'data: {"a":1}\n\ndata: {"b":2}']) == [b'{"a":1}', b'{"b":2}']
    assert read([b'data: {"a":1}\r']) == [b'{"a":1}']


@pytest.mark.parametrize(
    "events",
    [
        [b'data: {"n":%d}\n\n' % i for i in range(30)],  # OpenAI's: one data line each
        [b'event: e%d\ndata: {"n":%d}\n\n' % (i, i) for i in range(30)],  # Anthropic's: an event line, a data line
    ],
    ids=["data-lines", "event-and-data-lines"],
)
def test_a_read_of_many_events_of_one_shape_gives_each_s_data(events: list[bytes]) -> None:
    expected = [b'{"n":%d}' % i for i in range(30)]
    assert read([b"".join(events)]) == expected
    mixed = [*events[:10], b'data: {"x":\ndata: 1}\n\n', *events[10:]]  # one event of another shape among them
    assert read([b"".join(mixed)]) == [*expected[:10], b'{"x":\n1}', *expected[10:]]
