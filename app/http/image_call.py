"""An image request on the billed path: held for its ``n`` images at the dearest price it allows,
sent to the model's upstream, charged for what came back, answered with its cost.

It goes through the billed path of every JSON endpoint (``app/http/direct.py``: the same
:class:`~app.http.billed_call.BilledCall` as a chat request, with its rate limits, budgets,
Idempotency-Key and one settlement whatever happens); only its sizing and its bill differ
(``domain/image_pricing.py``). The answer is large — base64 images — so it is never decoded: its
top-level members are relayed as the upstream wrote them, the ``data`` array only counted, and
``usage`` (the upstream's, or one made here when it sent none, as dall-e-3 does) gains ``cost`` and
``remaining`` as chat's does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
from litestar import Request, Response

from app.errors import InsufficientCreditsError, InvalidRequest, UpstreamFailure
from app.http.attribution import attribution_of
from app.http.audio_call import Outgoing
from app.http.billed_call import BilledCall, hold
from app.http.billed_request import BilledRequest, Direct, HoldSize, OutputAsk, idempotency_of, request_id_of
from app.http.direct import Affordable, DirectAsk, serve_direct
from app.http.multipart import Form
from app.json import encode, object_or
from app.keys import Principal
from app.observability.record import current_record
from app.runtime import Runtime
from app.upstream import Answer
from domain import image_pricing
from domain.image_pricing import ImageAnswer, ImageAsk, ImageOptionError
from domain.pricing import Quote
from domain.settings import Model
from domain.usage import TokenUsage

_count_items = msgspec.json.Decoder(list[msgspec.Raw]).decode


@dataclass(frozen=True, slots=True)
class ImageRequest:
    """An image request its endpoint has parsed and authorised."""

    principal: Principal
    model: Model
    #: The ledger's name of the endpoint (``images.generations``), and the upstream API's path.
    endpoint: str
    path: str
    body: dict[str, Any]
    raw_body: bytes
    ask: ImageAsk


async def serve_images(runtime: Runtime, request: Request[Any, Any, Any], asked: ImageRequest) -> Response[bytes]:
    """Hold, call, charge, answer (``app/http/direct.py``). A size or quality the model's price in
    force does not offer is refused (400) before anything is held; a team that cannot afford the
    dearest the request allows is refused (402, saying how many images it affords) before the
    upstream is called."""
    ask = DirectAsk(
        asked.principal,
        asked.model,
        asked.endpoint,
        asked.body,
        asked.raw_body,
        Direct(asked.path, asked.body),
        admitted_tokens=asked.ask.prompt_bytes // 4,
    )
    return await serve_direct(runtime, request, ask, ImageBill(asked.model, asked.ask))


@dataclass(slots=True)
class ImageBill:
    """An image request's :class:`~app.http.direct.DirectEndpoint`: the ``SIZE/QUALITY`` prices it
    may be billed at, read from the price its hold is sized at (``worst_case`` comes first, once)."""

    model: Model
    ask: ImageAsk
    kinds: list[str] = field(default_factory=list)
    quote: Quote | None = None

    def worst_case(self, quote: Quote) -> int:
        try:
            self.kinds = image_pricing.kinds_asked(quote.price, self.model.image_defaults, self.ask)
        except ImageOptionError as exc:
            raise InvalidRequest(exc.message, param=exc.param) from None
        self.quote = quote
        return self._worst(self.ask.n)

    def _worst(self, n: int) -> int:
        assert self.quote is not None
        quote, ask = self.quote, self.ask
        fewer = ImageAsk(ask.size, ask.quality, n, ask.prompt_bytes, ask.input_images)
        return image_pricing.worst_case_in_micros(
            quote.price, self.kinds, fewer, quote.credits_per_usd, quote.adjustment
        )

    def affordable(self, quote: Quote, available: int) -> Affordable:
        """The most images of the same size and quality ``available`` covers (fewer than asked)."""
        most = max((n for n in range(self.ask.n - 1, 0, -1) if self._worst(n) <= available), default=0)
        return Affordable("n", most, "images (n)")

    def usage(self, answer: Answer) -> TokenUsage:
        assert self.quote is not None
        return image_pricing.usage_of(self.quote.price, self.kinds, _read(answer))

    def render(self, answer: Answer, fields: dict[str, Any]) -> bytes:
        """The answer as the upstream wrote it, its ``usage`` carrying the charge's ``cost`` and
        ``remaining`` (a usage object made here, saying the images returned, when it sent none)."""
        reported = object_or(answer.member("usage"), None)
        if reported is None:
            reported = {"images": _read(answer).images}
        return encode({**answer.members, "usage": {**reported, **fields}})


def _read(answer: Answer) -> ImageAnswer:
    """What the answer says about its cost, without decoding its images: ``data`` counted as raw
    items, ``size``, ``quality`` and ``usage`` (small) decoded."""
    raw = answer.members.get("data")
    if raw is None or not answer.starts_with("data", b"["):
        raise UpstreamFailure("The upstream provider sent an image answer without data.")
    try:
        images = len(_count_items(raw))
    except msgspec.DecodeError:
        raise UpstreamFailure("The upstream provider sent invalid JSON.") from None
    size, quality = answer.member("size"), answer.member("quality")
    return ImageAnswer(
        images,
        size if isinstance(size, str) else None,
        quality if isinstance(quality, str) else None,
        answer.member("usage"),
    )


async def serve_image_edit(
    runtime: Runtime, request: Request[Any, Any, Any], asked: ImageRequest, form: Form
) -> Response[bytes]:
    """An edit: held and charged as a generation is (its input images held at their bound for a
    token-priced model), its form sent upstream as a stream (``app/http/multipart.py``), the
    deployment's name of the model put in for each attempt. ``asked.raw_body`` is the form's
    digest, what an Idempotency-Key is compared by whatever boundary the client chose."""
    services = runtime.billing_services
    record = current_record()
    billed = BilledRequest(
        principal=asked.principal,
        model=asked.model,
        protocol="chat",  # OpenAI's error shape; its `user` is the end user
        upstream_wire=services.upstreams[asked.model.id].wire,
        endpoint=asked.endpoint,
        stream=False,
        request_id=request_id_of(record),
        idempotency=idempotency_of(request, asked.raw_body),
        attribution=attribution_of(request, "chat", asked.body),
        prompt_tokens=asked.ask.prompt_bytes // 4,
        output=OutputAsk(most=0, requested=0),
        record=record,
    )
    bill = ImageBill(asked.model, asked.ask)
    quote = services.billing.quote(asked.principal, asked.model)
    size = HoldSize(worst_case=bill.worst_case(quote), admitted_tokens=asked.ask.prompt_bytes // 4)
    outgoing = Outgoing(asked.path, asked.body, form)
    try:
        call = await hold(services, request, billed, outgoing, size)
    except InsufficientCreditsError as short:
        covered = bill.affordable(quote, short.available)
        raise short.affording_count(covered.name, covered.count, covered.words) from None
    if not isinstance(call, BilledCall):
        return call  # the stored answer of the request served before under this Idempotency-Key
    async with call:
        call.seal()
        raw = await call.call_upstream(lambda upstream: upstream.post_upload(outgoing.path, outgoing.upload_for))
        if not raw.is_json:
            raise UpstreamFailure("The upstream provider sent an image answer that is not JSON.")
        answer = Answer(raw.content)
        usage = bill.usage(answer)
        body = await call.charge(usage, lambda fields: bill.render(answer, fields))
    return Response(body, headers=call.headers, media_type="application/json")
