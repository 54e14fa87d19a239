"""What one billed request is, as records: what its endpoint read (:class:`Generation`), then what is
billed (:class:`BilledRequest`), so that the billed path (``relay.py`` → ``billed_call.py``) passes one
typed, frozen value from step to step instead of a dozen positional arguments.

An endpoint parses and authorises a request and hands its :class:`Generation` to the relay; the relay
sizes its prompt, plans what goes upstream and reads its attribution and Idempotency-Key, and from
then on the request is its :class:`BilledRequest`: who pays (team and key), for which model, through
which wires and endpoint, streamed or not, under which request id and Idempotency-Key, attributed to
whom, with how large a prompt and how much output asked.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from litestar import Request

from app.errors import InvalidRequest
from app.keys import Principal
from app.ledger.billing import Idempotency, RequestBill
from app.observability.record import RequestRecord
from app.observability.request_ids import new_request_id
from app.ratelimit import Admission
from app.tokens import Protocol as Wire
from domain import endpoints
from domain.attribution import Attribution
from domain.client_text import ClientTextError, checked_text, header_text
from domain.settings import Model

IDEMPOTENCY_HEADER = "Idempotency-Key"
MAX_IDEMPOTENCY_KEY = 255
#: Each protocol's endpoint, as the ledger records it.
ENDPOINTS: dict[str, str] = {
    "chat": endpoints.CHAT,
    "responses": endpoints.RESPONSES,
    "messages": endpoints.MESSAGES,
    "gemini": endpoints.GENERATE_CONTENT,
}


@dataclass(frozen=True, slots=True)
class OutputAsk:
    """The output a request may produce, as its endpoint read it."""

    #: The output tokens it may use in all its choices: what its worst case is held for.
    most: int
    #: What the client asked for in all its choices (0: it named no limit), its rate-limit estimate.
    requested: int
    #: Its choices (chat's ``n``): each may use the whole allowance.
    choices: int = 1
    #: The model's own output limit, when the request asked more and the model serves it with its own
    #: (``clamp_output_to_model``), which the answer says; None otherwise.
    model_limit: int | None = None


@dataclass(frozen=True, slots=True)
class Generation:
    """A generation request its endpoint has parsed and authorised: where the billed path starts."""

    principal: Principal
    model: Model
    #: The client's protocol.
    protocol: Wire
    body: dict[str, Any]
    raw_body: bytes
    output: OutputAsk


class Outbound(Protocol):
    """What goes upstream for a held request, as the billed call (``billed_call.py``) reads it: a
    generation's :class:`~app.translate.exchange.Exchange`, or a :class:`Direct` request."""

    #: The JSON body sent (its ``model`` becomes each deployment's name for the model).
    body: dict[str, Any]
    #: The client's headers forwarded with it (a protocol's version and betas).
    headers: dict[str, str]
    #: Whether the answer is a stream (a stream takes one of the key's stream slots).
    stream: bool
    #: Whose errors reach the client word for word: the upstream's wire when the body went as the
    #: client wrote it (None: the gateway's own words).
    passthrough_wire: str | None


@dataclass(slots=True)
class Direct:
    """A request to an endpoint other than generation (embeddings, images, ...), sent upstream as
    the client wrote it but for ``model``: its route calls ``BilledCall.call_upstream`` with it
    (``upstream.post(direct.path, direct.body, direct.headers)`` for a JSON answer)."""

    #: The upstream's path under its base URL (``/embeddings``).
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    stream: bool = False
    #: The endpoints beyond chat are OpenAI's: the upstream's errors go back as it wrote them.
    passthrough_wire: str | None = "chat"


@dataclass(frozen=True, slots=True)
class BilledRequest:
    """One request on the billed path, sized and planned (see the module's docstring)."""

    principal: Principal
    model: Model
    #: The client's protocol, and the one its model's upstream speaks.
    protocol: Wire
    upstream_wire: str
    #: The endpoint the ledger records (``domain/endpoints.py``).
    endpoint: str
    stream: bool
    #: The id its charge records and its answer carries.
    request_id: str
    idempotency: Idempotency | None
    attribution: Attribution
    #: The prompt's size bound, in tokens (``app/http/prompt_size.py``).
    prompt_tokens: int
    output: OutputAsk
    #: What its log line and metrics will say (None outside a served request).
    record: RequestRecord | None

    def bill(self, admission: Admission) -> RequestBill:
        """Its billing context for the ledger, once admitted against its rate limits."""
        return RequestBill(
            self.principal,
            self.model,
            self.request_id,
            self.endpoint,
            self.idempotency,
            admission,
            record=self.record,
            attribution=self.attribution,
        )


@dataclass(frozen=True, slots=True)
class HoldSize:
    """What one hold of a request reserves: its ``worst_case`` cost (micro-credits), and the tokens it
    is admitted for against its rate limits (``admitted_tokens``: its estimate)."""

    worst_case: int
    admitted_tokens: int


def idempotency_of(request: Request[Any, Any, Any], raw_body: bytes) -> Idempotency | None:
    """The request's Idempotency-Key, with a hash of the body it is used for; None without one.
    Every attempt is a request of its own, also under an Idempotency-Key: the ledger serves one attempt
    per key at a time, a retry gets the stored answer of the one that completed, and once that answer
    expires a retry is a new request, charged under its own id."""
    header = request.headers.get(IDEMPOTENCY_HEADER.lower())
    if header is None:
        return None
    return Idempotency(_idempotency_key(header), hashlib.sha256(raw_body).hexdigest())


def request_id_of(record: RequestRecord | None) -> str:
    """The id of the request being served: its record's, so that the id the charge records is the one
    its log line and answer carry; a new one outside a served request."""
    return record.request_id if record is not None else new_request_id()


def _idempotency_key(header: str) -> str:
    """The Idempotency-Key as its UTF-8 bytes spell it, recorded with the hold and the stored answer:
    1 to 255 characters, by the rule every recorded client text follows (``domain/client_text.py``)."""
    try:
        key = checked_text(header_text(header, IDEMPOTENCY_HEADER), IDEMPOTENCY_HEADER, MAX_IDEMPOTENCY_KEY)
    except ClientTextError as exc:
        raise InvalidRequest(
            f"Invalid '{IDEMPOTENCY_HEADER}' header: {exc.problem}.", param=IDEMPOTENCY_HEADER
        ) from None
    if not key:
        raise InvalidRequest(f"The {IDEMPOTENCY_HEADER} header must be 1 to {MAX_IDEMPOTENCY_KEY} characters long.")
    return key
