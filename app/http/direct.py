"""The billed path of a JSON endpoint other than generation (embeddings, images, ...): hold, call, charge.

Generation requests go through ``relay.py`` (a prompt sized by the protocol, an exchange that passes
through or translates, streams). Other endpoints send the client's body to one path of the upstream
(:class:`~app.http.billed_request.Direct`) and get one JSON answer; what differs between them is
said by their :class:`DirectEndpoint`: the worst case a hold reserves, what the balance covers when
it is short, what an answer is charged for, and the answer the client reads with its cost. The money
moves through the same :class:`~app.http.billed_call.BilledCall` as every generation, so rate limits,
budgets, Idempotency-Keys, the request lookup, attribution, metrics and the access log hold alike.

How a new JSON endpoint plugs in: its route parses and checks the body, finds the model with
``served_model`` (404 for one that does not serve the endpoint), authorises the key for the endpoint,
and calls :func:`serve_direct` with a :class:`DirectAsk` and its :class:`DirectEndpoint`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from litestar import Request, Response

from app.errors import InsufficientCreditsError
from app.http.attribution import attribution_of
from app.http.billed_call import BilledCall, hold
from app.http.billed_request import BilledRequest, Direct, HoldSize, OutputAsk, idempotency_of, request_id_of
from app.keys import Principal
from app.observability.record import current_record
from app.runtime import Runtime
from app.upstream import Answer
from domain.pricing import Quote
from domain.settings import Model
from domain.usage import TokenUsage


@dataclass(frozen=True, slots=True)
class Affordable:
    """The most of a request's quantity the balance covers, for a refusal for credits: ``count`` of
    ``name`` (``input_tokens``), which the message calls ``words`` (``input tokens``)."""

    name: str
    count: int
    words: str


class DirectEndpoint(Protocol):
    """What an endpoint says about one of its requests on the billed path."""

    def worst_case(self, quote: Quote) -> int:
        """The most the request can cost at ``quote``, in micro-credits: what its hold reserves."""
        ...

    def affordable(self, quote: Quote, available: int) -> Affordable | None:
        """The most of its quantity ``available`` micro-credits cover (None: say nothing more)."""
        ...

    def usage(self, answer: Answer) -> TokenUsage:
        """What the upstream's answer is charged for (an answer that cannot be read raises a
        ``GatewayError``, which releases the hold)."""
        ...

    def render(self, answer: Answer, fields: dict[str, Any]) -> bytes:
        """The client's body: the upstream's answer with the charge's ``usage`` fields (``cost``,
        ``remaining``) added; stored under the request's Idempotency-Key."""
        ...


@dataclass(frozen=True, slots=True)
class DirectAsk:
    """A request its route has parsed, found the model of and authorised."""

    principal: Principal
    model: Model
    #: The endpoint the ledger records (``domain/endpoints.py``).
    endpoint: str
    #: The client's body (its ``user`` is the end user) and its bytes (the Idempotency-Key's hash).
    body: dict[str, Any]
    raw_body: bytes
    #: What goes upstream.
    direct: Direct
    #: The tokens it is admitted for against the key's and team's token rate limits (0: none).
    admitted_tokens: int


async def serve_direct(
    runtime: Runtime, request: Request[Any, Any, Any], ask: DirectAsk, endpoint: DirectEndpoint
) -> Response[bytes]:
    """Hold the request's worst case (402 saying what the balance covers when it falls short), send it
    upstream, charge what the answer reports and answer with its cost; the stored answer instead for
    an Idempotency-Key served before."""
    services = runtime.billing_services
    record = current_record()
    billed = BilledRequest(
        principal=ask.principal,
        model=ask.model,
        protocol="chat",  # the OpenAI shape: its `user` is the end user
        upstream_wire=services.upstreams[ask.model.id].wire,
        endpoint=ask.endpoint,
        stream=ask.direct.stream,
        request_id=request_id_of(record),
        idempotency=idempotency_of(request, ask.raw_body),
        attribution=attribution_of(request, "chat", ask.body),
        prompt_tokens=ask.admitted_tokens,
        output=OutputAsk(most=0, requested=0),
        record=record,
    )
    quote = services.billing.quote(ask.principal, ask.model)
    size = HoldSize(worst_case=endpoint.worst_case(quote), admitted_tokens=ask.admitted_tokens)
    try:
        call = await hold(services, request, billed, ask.direct, size)
    except InsufficientCreditsError as short:
        covered = endpoint.affordable(quote, short.available)
        if covered is None:
            raise
        raise short.affording_count(covered.name, covered.count, covered.words) from None
    if not isinstance(call, BilledCall):
        return call  # the stored answer of the request served before under this Idempotency-Key
    direct = ask.direct
    async with call:
        call.seal()
        answer = await call.call_upstream(lambda upstream: upstream.post(direct.path, direct.body, direct.headers))
        usage = endpoint.usage(answer)
        body = await call.charge(usage, lambda fields: endpoint.render(answer, fields))
    return Response(body, headers=call.headers, media_type="application/json")
