"""A billed call is settled exactly once, also on the paths the end-to-end suite cannot time.

In process, without a gateway: the real relay and the real chat codec around a :class:`BilledCall`,
an upstream that answers what each test needs, and a ledger that records what it is asked. Two
endings are forced here because no client can land them on purpose through a socket: a stream cut
off while its final charge is being made (the charge is made all the same, and nothing else may be
queued after it), and an upstream answer that cannot be read (its hold must not wait to expire).
"""

from __future__ import annotations

import asyncio
import uuid
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.http.answer_head import UnsendableHead
from app.http.billed_call import BilledCall
from app.http.billed_request import BilledRequest, OutputAsk
from app.http.event_stream import EventStream
from app.http.relay import answer
from app.keys import Principal
from app.ledger.billing import RequestBill
from app.ledger.receipts import Charge
from app.ledger.streams_in_flight import StreamsInFlight
from app.translate.exchange import plan
from app.upstream.base import Answer, StreamEvent
from app.upstream.fallback import Deployment, FallbackUpstream
from domain.attribution import Attribution
from domain.settings import parse_settings
from domain.usage import TokenUsage

ROOT = Path(__file__).resolve().parents[4]
MODEL = parse_settings((ROOT / "examples" / "demo.toml").read_text(), "demo.toml").models[0]
PROMPT_TOKENS = 7


class Ledger:
    """What the call asks of billing, in order; ``cut_off_charges``: a charge's caller is cut off
    while it is made, as ``Billing.charge`` is then (the charge goes on; the caller sees the cancellation)."""

    def __init__(self, cut_off_charges: bool = False) -> None:
        self.asked: list[tuple[str, Any]] = []
        self.cut_off_charges = cut_off_charges

    async def charge(
        self, bill: RequestBill, usage: TokenUsage, render: Any = None, **options: Any
    ) -> tuple[Charge, bytes]:
        self.asked.append(("charge", usage))
        if self.cut_off_charges:
            raise asyncio.CancelledError
        charge = Charge(credits=Decimal("0.1"), usd=Decimal("0.001"), remaining_credits=Decimal(50))
        return charge, render(charge) if render is not None else b""

    async def release(self, bill: RequestBill, reason: str) -> None:
        self.asked.append(("release", reason))

    def charge_soon(self, bill: RequestBill, usage: TokenUsage) -> None:
        self.asked.append(("charge_soon", usage))

    def release_soon(self, bill: RequestBill, reason: str) -> None:
        self.asked.append(("release_soon", reason))


class UpstreamStream:
    def __init__(self, chunks: list[dict[str, Any]]) -> None:
        self.chunks = chunks
        self.closed = False

    async def __aiter__(self) -> Any:
        for chunk in self.chunks:  # one read each
            yield [StreamEvent.of(chunk)]

    def close(self) -> None:
        self.closed = True


class Upstream:
    wire = "chat"

    def __init__(self, answer: dict[str, Any] | None = None, chunks: list[dict[str, Any]] | None = None) -> None:
        self.answer = answer or {}
        self.stream = UpstreamStream(chunks or [])

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        return Answer.of(self.answer)

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> UpstreamStream:
        return self.stream


class Slot:
    in_redis = False

    def __init__(self) -> None:
        self.released = 0

    async def release(self) -> None:
        self.released += 1


def chunk(text: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "x",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }


def held_call(ledger: Ledger, upstream: Upstream, stream: bool, slot: Any = None) -> BilledCall:
    """A call as ``app.http.billed_call.hold`` hands it over: held, with its exchange (passed through)."""
    adapter: Any = upstream  # an adapter as the deployments' upstream calls it
    deployments = FallbackUpstream(MODEL.id, [Deployment(adapter, MODEL.id)])
    services: Any = SimpleNamespace(billing=ledger, upstreams={MODEL.id: deployments}, in_flight=StreamsInFlight())
    body = {"model": MODEL.id, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    exchange = plan(MODEL, "chat", "chat", body, {}, PROMPT_TOKENS)
    principal = Principal(uuid.uuid4(), "acme", "key-1")
    billed = BilledRequest(
        principal=principal,
        model=MODEL,
        protocol="chat",
        upstream_wire="chat",
        endpoint="chat",
        stream=stream,
        request_id="req-1",
        idempotency=None,
        attribution=Attribution(),
        prompt_tokens=PROMPT_TOKENS,
        output=OutputAsk(most=100, requested=0),
        record=None,
    )
    bill = RequestBill(principal, MODEL, "req-1", "chat", open=True)
    return BilledCall(services, billed, bill, exchange, {}, slot)


async def test_a_stream_cut_off_while_its_charge_is_made_is_charged_once_and_nothing_more():
    ledger, slot = Ledger(cut_off_charges=True), Slot()
    upstream = Upstream(
        chunks=[
            chunk("Hello "),
            chunk("there"),
            {
                "id": "c1",
                "object": "chat.completion.chunk",
                "model": "x",
                "choices": [],
                "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
            },
        ]
    )
    response = await answer(held_call(ledger, upstream, stream=True, slot=slot))
    assert isinstance(response, EventStream)
    frames = response.iterator
    with pytest.raises(asyncio.CancelledError):
        async for _ in frames:
            pass
    assert ledger.asked == [("charge", TokenUsage(input_tokens=9, output_tokens=2))]
    assert slot.released == 1
    assert upstream.stream.closed


async def test_a_client_that_hangs_up_mid_stream_is_billed_what_it_was_sent_once():
    ledger, slot = Ledger(), Slot()
    upstream = Upstream(chunks=[chunk("Hello "), chunk("there "), chunk("again")])
    response = await answer(held_call(ledger, upstream, stream=True, slot=slot))
    assert isinstance(response, EventStream)
    assert b"Hello " in response.first  # read before answering
    frames = response.iterator
    await frames.__anext__()  # the relay resumed after the first frame went out: it counts as delivered
    await frames.aclose()  # the client hung up
    assert [name for name, _ in ledger.asked] == ["charge_soon"]
    assert ledger.asked[0][1].output_tokens > 0
    assert slot.released == 1
    assert upstream.stream.closed


async def test_a_plain_answer_that_cannot_be_read_releases_its_hold_at_once():
    ledger = Ledger()
    unreadable = {"choices": [{"index": 0, "message": {"tool_calls": [{"function": "not an object"}]}}]}
    with pytest.raises(AttributeError):  # the codec's own error, here; whatever it is, the hold is released
        await answer(held_call(ledger, Upstream(answer=unreadable), stream=False))
    assert ledger.asked == [("release", "upstream failed")]


async def test_a_plain_answer_is_charged_once_and_reports_its_charge():
    ledger = Ledger()
    upstream = Upstream(
        answer={
            "id": "x",
            "object": "chat.completion",
            "created": 1,
            "model": "x",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
        }
    )
    response = await answer(held_call(ledger, upstream, stream=False))
    assert ledger.asked == [("charge", TokenUsage(input_tokens=9, output_tokens=1))]
    assert b'"cost"' in response.content


class CountingUpstream(Upstream):
    def __init__(self) -> None:
        super().__init__(answer={"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}}]})
        self.calls = 0

    async def complete(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
        self.calls += 1
        return await super().complete(body, headers)

    async def open_stream(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> UpstreamStream:
        self.calls += 1
        return await super().open_stream(body, headers)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("value", ["网络搜索", "a\r\nb"], ids=["not-latin-1", "cr-lf"])
async def test_an_answer_whose_headers_http_cannot_carry_is_refused_before_the_upstream_and_never_charged(
    stream: bool, value: str
):
    ledger, upstream = Ledger(), CountingUpstream()
    call = held_call(ledger, upstream, stream=stream)
    call.headers["x-unsendable"] = value  # no header the gateway makes can be like this: the guard behind that
    with pytest.raises(UnsendableHead) as refused:
        await answer(call)
    assert refused.value.status == 500
    assert "x-unsendable" in refused.value.message
    assert ledger.asked == [("release", "upstream failed")]
    assert upstream.calls == 0
