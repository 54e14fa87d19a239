"""Audio requests on the billed path: a transcription or translation held for the seconds of the
uploaded file, speech held for the characters of its input; each charged exactly once through the
same :class:`~app.http.billed_call.BilledCall` as every other endpoint (rate limits, budgets,
Idempotency-Keys, the request lookup, attribution, metrics, the access log).

**Transcriptions and translations** are held here, for the file's own seconds (read from its header
before the hold, ``app/audio_duration.py``) at the model's ``audio_second`` price, or for a model
priced per token (``audio_input``) for the tokens those seconds, the prompt and the output limit may
come to (``domain/audio_pricing.py``); ``app/http/transcripts.py`` sends them and charges what the
answer reports. Every answer of these endpoints carries its cost and the balance after it in its
headers (:data:`COST_HEADER`, :data:`COST_USD_HEADER`, :data:`REMAINING_HEADER`).

**Speech.** The hold is the input's characters at ``input_characters`` per million, which is also the
charge: the cost is known before the audio starts, and goes in the headers with the balance the
team will have once it is charged (read as the audio starts: requests of the team settled
meanwhile are not in it). The audio is relayed as it comes, never held whole (but for an
Idempotency-Key, whose answer is stored to be replayed, as a stream's frames are). It is charged
once its last byte went out to the client; an audio stream that ends early — the upstream broke
off, the client hung up — is not charged: the client did not get the answer it asked for, and the
characters it got cannot be told from the bytes.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import anyio
from litestar import Request, Response

from app.errors import InsufficientCreditsError
from app.http.attribution import attribution_of
from app.http.billed_call import BilledCall, hold
from app.http.billed_request import BilledRequest, HoldSize, OutputAsk, idempotency_of, request_id_of
from app.http.event_stream import EventStream
from app.http.multipart import Form
from app.keys import Principal
from app.observability.record import current_record
from app.runtime import Runtime
from app.upstream.media import Upload
from domain import audio_pricing
from domain.audio_pricing import Heard
from domain.money import credits_from_micros
from domain.pricing import Quote, price_usage
from domain.settings import Model
from domain.usage import TokenUsage

#: The charge's cost in credits, and in USD; the team's balance after it, in credits.
COST_HEADER = "x-tollgate-cost"
COST_USD_HEADER = "x-tollgate-cost-usd"
REMAINING_HEADER = "x-tollgate-remaining"


@dataclass(slots=True)
class Outgoing:
    """What goes upstream for an audio request (the billed call's ``Outbound``): a form to upload, or
    speech's JSON ``body``, to ``path`` under the provider's base URL."""

    path: str
    body: dict[str, Any]
    form: Form | None = None
    headers: dict[str, str] = field(default_factory=dict)
    stream: bool = False
    #: OpenAI's endpoints, passed through: the upstream's errors go back as it wrote them.
    passthrough_wire: str | None = "chat"
    #: Form fields sent with another value than the client's (``response_format``: see the module).
    overrides: dict[str, str] = field(default_factory=dict)

    def upload_for(self, model: str) -> Upload:
        """The form with the deployment's name of the model, as a body read anew for each attempt."""
        assert self.form is not None
        form, boundary = self.form.with_value("model", model), secrets.token_hex(16)
        for name, value in self.overrides.items():
            form = form.with_value(name, value)
        first = form.encode(boundary)
        return Upload(first.content_type, first.length, lambda: form.encode(boundary).chunks)


@dataclass(frozen=True, slots=True)
class AudioAsk:
    """An audio request its route has parsed, found the model of and authorised."""

    principal: Principal
    model: Model
    #: The endpoint the ledger records (``domain/endpoints.py``).
    endpoint: str
    #: The text fields (a form's) or the JSON body: its ``user`` is the end user.
    fields: dict[str, Any]
    #: What the Idempotency-Key's hash is taken of: the body's bytes, or a form's digest.
    digest: bytes
    #: The quantity held: the file's seconds, or the input's characters.
    usage: TokenUsage
    outgoing: Outgoing
    #: A transcription's file, prompt and output limit, its hold's size (None: speech).
    heard: Heard | None = None

    def worst_case(self, quote: Quote, count: int) -> int:
        """What the request costs at most, were it ``count`` seconds (or characters) long."""
        if self.heard is not None:
            heard = self.heard.lasting(count)
            return audio_pricing.worst_case_in_micros(quote.price, heard, quote.credits_per_usd, quote.adjustment)
        asked = TokenUsage(input_characters=count)
        return price_usage(asked, quote.price, quote.credits_per_usd, quote.adjustment).micros


def _affordable(quote: Quote, ask: AudioAsk, available: int) -> tuple[str, int, str]:
    """The most seconds (or characters) ``available`` micro-credits cover, for the 402."""
    seconds = ask.heard is not None
    name, words = ("audio_seconds", "seconds of audio") if seconds else ("input_characters", "characters")
    low, high = 0, ask.usage.audio_seconds or ask.usage.input_characters
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if ask.worst_case(quote, middle) <= available else (low, middle - 1)
    return name, low, words


async def held(
    runtime: Runtime, request: Request[Any, Any, Any], ask: AudioAsk
) -> tuple[BilledCall[Outgoing] | Response[bytes], Quote]:
    services = runtime.billing_services
    record = current_record()
    billed = BilledRequest(
        principal=ask.principal,
        model=ask.model,
        protocol="chat",  # OpenAI's error shape; its `user` is the end user
        upstream_wire=services.upstreams[ask.model.id].wire,
        endpoint=ask.endpoint,
        stream=ask.outgoing.stream,
        request_id=request_id_of(record),
        idempotency=idempotency_of(request, ask.digest),
        attribution=attribution_of(request, "chat", ask.fields),
        prompt_tokens=0,
        output=OutputAsk(most=0, requested=0),
        record=record,
    )
    quote = services.billing.quote(ask.principal, ask.model)
    worst = ask.worst_case(quote, ask.usage.audio_seconds or ask.usage.input_characters)
    try:
        call = await hold(services, request, billed, ask.outgoing, HoldSize(worst_case=worst, admitted_tokens=0))
    except InsufficientCreditsError as short:
        raise short.affording_count(*_affordable(quote, ask, short.available)) from None
    return call, quote


def cost_headers(fields: dict[str, Any]) -> dict[str, str]:
    """A charge's cost and the balance after it, as the answer's headers (exact credits and USD)."""
    return {
        COST_HEADER: str(fields["cost"]["credits"]),
        COST_USD_HEADER: str(fields["cost"]["usd"]),
        REMAINING_HEADER: str(fields["remaining"]["credits"]),
    }


async def serve_speech(
    runtime: Runtime, request: Request[Any, Any, Any], ask: AudioAsk
) -> Response[bytes] | EventStream:
    """Hold the input's characters, open the upstream's audio, relay it, charge once it all went out."""
    call, quote = await held(runtime, request, ask)
    if not isinstance(call, BilledCall):
        return call
    cost = price_usage(ask.usage, quote.price, quote.credits_per_usd, quote.adjustment).micros
    team = ask.principal.team_name

    async def balance() -> int:
        funds = await anyio.to_thread.run_sync(runtime.ledger.funds, team)
        return funds.balance

    relay = _speech(call, ask, (cost, quote.credits_per_usd), balance)
    first = await relay.__anext__()  # the upstream's refusal is an ordinary error answer
    return EventStream(first, relay, headers=call.headers)


async def _speech(
    call: BilledCall[Outgoing], ask: AudioAsk, priced: tuple[int, Decimal], balance: Callable[[], Awaitable[int]]
) -> AsyncGenerator[bytes, None]:
    """Open the audio, then relay it chunk by chunk; charged after the last chunk went out (the
    generator resumed after it), released if it ends before (the call leaves its held phase then)."""
    outgoing = ask.outgoing
    async with call:
        stream = await call.call_upstream(lambda upstream: upstream.open_bytes(outgoing.path, outgoing.body))
        try:
            cost, credits_per_usd = priced
            remaining = await balance() - cost
            headers = {
                "content-type": stream.content_type,
                COST_HEADER: str(credits_from_micros(cost)),
                COST_USD_HEADER: str(credits_from_micros(cost) / credits_per_usd),
                REMAINING_HEADER: str(credits_from_micros(remaining)),
            }
            call.seal(headers)
            yield b""  # the head goes out with the first chunk; nothing is charged yet
            async for chunk in stream:
                if chunk:
                    if call.transcript is not None:
                        call.transcript.append(chunk)
                    yield chunk
            await call.charge_delivered(ask.usage, stream.content_type)
        finally:
            stream.close()
