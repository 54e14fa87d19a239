"""One error hierarchy for every endpoint: each error knows its HTTP status and its type.

Handlers raise these; one exception handler renders them in the endpoint's wire shape (for the
OpenAI-style endpoints: ``{"error": {"message", "type", "param", "code"}}``). Nothing else ever
reaches a client, so a bug shows up as a clean 500 ``server_error``, never a traceback.
"""

from __future__ import annotations

from app.error_types import retyped

#: The longest error message (and ``param``) a client is sent. Messages quote what the client sent —
#: a model name, a path, a field, a tool type — which may be of any length: a 100 KB model name
#: must not come back in a 100 KB 404. Past the bound the middle is left out, saying how much: a
#: message's start says what went wrong and its end what to do, and the gateway's own words are
#: far shorter than this, so only a quotation is ever cut.
MAX_MESSAGE = 1000
MAX_PARAM = 200
#: Google's status names (``google.rpc.Code``) for the HTTP statuses Tollgate answers, as the Gemini
#: API's error shape carries them (docs/api.md, "Gemini"). Google has no 402: a refusal for credits
#: keeps its 402 and says FAILED_PRECONDITION, what Google answers when billing must be set up first
#: (RESOURCE_EXHAUSTED is its 429, which clients retry).
GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    402: "FAILED_PRECONDITION",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "INVALID_ARGUMENT",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    431: "INVALID_ARGUMENT",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def google_status(status: int) -> str:
    """Google's status name for an HTTP status (one it has no name for: by its class)."""
    return GOOGLE_STATUS.get(status) or ("INTERNAL" if status >= 500 else "INVALID_ARGUMENT")


def bounded(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text``, or its start and end with the middle left out if it is longer than ``limit``."""
    if len(text) <= limit:
        return text
    tail = limit // 4
    head = limit - tail - 40  # room for the note
    return f"{text[:head]}… [{len(text) - head - tail} characters left out] …{text[-tail:]}"


class GatewayError(Exception):
    status: int = 500
    type: str = "server_error"
    #: The type in the Messages error shape (docs/api.md, "Errors").
    anthropic_type: str = "api_error"
    #: Sent as ``x-should-retry``, which the official SDKs obey: transient failures say true.
    retryable: bool = True
    #: An upstream deployment failed before it began answering (unreachable, timed out, 5xx, 429), so
    #: another deployment of the model may be tried (``app/upstream/fallback.py``). Set only where
    #: upstream failures are mapped (``app/upstream/errors.py``).
    failover: bool = False
    #: What kind of upstream failure this is, for the metrics (``tollgate_upstream_errors``); None
    #: for errors of the gateway's own. Set only where upstream failures are mapped.
    upstream_kind: str | None = None
    #: The upstream's own error, kept so that a request passed through to an upstream of its own
    #: protocol gets it word for word (coding agents match on the wording): the wire it came in
    #: (``chat``, ``messages`` or ``responses``), and either its status and body, or the stream event.
    upstream_wire: str | None = None
    upstream_status: int | None = None
    upstream_body: bytes | None = None
    upstream_event: dict[str, object] | None = None
    #: Answer with the upstream's own error as it came (set where a request was passed through).
    verbatim: bool = False

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        status: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        message = bounded(message)
        super().__init__(message)
        self.message = message
        self.param = bounded(param, MAX_PARAM) if param is not None else None
        self.code = code
        if status is not None:
            self.status = status
        self.headers = headers or {}

    def openai_body(self) -> dict[str, object]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response_headers(self) -> dict[str, str]:
        return {"x-should-retry": "true" if self.retryable else "false", **self.headers}

    def relayed_answer(self) -> tuple[int, bytes] | None:
        """The upstream's own status and error body, for a request passed through to it, with the
        type the specification gives that status (``app/error_types.py``) — except a refusal of the
        gateway's own key (401, 403), which is Tollgate's to explain, and a body that is no error of
        the protocol's (the gateway's own error says what it was)."""
        status, body, wire = self.upstream_status, self.upstream_body, self.upstream_wire
        if not self.verbatim or body is None or wire is None or status is None or status in (401, 403):
            return None
        typed = retyped(body, wire, status)
        return None if typed is None else (status, typed)

    def anthropic_body(self) -> dict[str, object]:
        return {"type": "error", "error": {"type": self.anthropic_type, "message": self.message}}

    def gemini_body(self) -> dict[str, object]:
        """Google's error shape (``google.rpc.Status`` as JSON), as the Gemini API answers."""
        return {"error": {"code": self.status, "message": self.message, "status": google_status(self.status)}}


class InvalidRequest(GatewayError):
    status = 400
    type = "invalid_request_error"
    anthropic_type = "invalid_request_error"
    retryable = False


class AuthenticationFailed(GatewayError):
    status = 401
    type = "authentication_error"
    anthropic_type = "authentication_error"
    retryable = False


class InsufficientCreditsError(GatewayError):
    """The team's available balance does not cover the request's worst case (``needed`` against
    ``available``, micro-credits); once known, ``affordable_max_tokens`` says the largest output
    limit the balance covers, in the body and in ``x-tollgate-affordable-max-tokens``."""

    status = 402
    type = "billing_error"
    anthropic_type = "billing_error"
    retryable = False

    def __init__(
        self,
        message: str,
        *,
        needed: int = 0,
        available: int = 0,
        budget: dict[str, object] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, headers=headers)  # a hard budget failure: retrying cannot help
        self.needed = needed
        self.available = available
        self.affordable_max_tokens: int | None = None
        #: For endpoints that generate no tokens: the most of each quantity the balance covers.
        self.affordable: dict[str, int] = {}
        #: The budget that refused the request, when one did rather than the balance: whose, its
        #: limit and period, what it has left and when it resets (``budget`` in the error body).
        self.budget = budget

    def affording(self, tokens: int, field: str) -> InsufficientCreditsError:
        """The refusal, saying the largest ``field`` (the request's output limit) the balance covers."""
        what = "the budget's remainder" if self.budget else "the available balance"
        covers = f"{what} covers {field} up to {tokens}" if tokens > 0 else f"{what} does not cover even the prompt"
        told = InsufficientCreditsError(
            f"{self.message} {covers[:1].upper()}{covers[1:]}.",
            needed=self.needed,
            available=self.available,
            budget=self.budget,
        )
        told.affordable_max_tokens = tokens
        told.headers = {**self.headers, "x-tollgate-affordable-max-tokens": str(tokens)}
        return told

    def affording_count(self, name: str, count: int, words: str) -> InsufficientCreditsError:
        """The refusal of an endpoint that generates no tokens, saying the most of its quantity the
        balance covers: ``count`` of ``name`` (``input_tokens``: the body's ``affordable_input_tokens``
        and ``x-tollgate-affordable-input-tokens``), ``words`` naming it in the message ("input tokens")."""
        what = "the budget's remainder" if self.budget else "the available balance"
        told = InsufficientCreditsError(
            f"{self.message} {what[:1].upper()}{what[1:]} covers up to {count} {words}.",
            needed=self.needed,
            available=self.available,
            budget=self.budget,
        )
        told.affordable = {**self.affordable, name: count}
        told.headers = {**self.headers, f"x-tollgate-affordable-{name.replace('_', '-')}": str(count)}
        return told

    def _extended(self, body: dict[str, object]) -> dict[str, object]:
        error: dict[str, object] = body["error"]  # type: ignore[assignment]
        if self.affordable_max_tokens is not None:
            error["affordable_max_tokens"] = self.affordable_max_tokens
        for name, count in self.affordable.items():
            error[f"affordable_{name}"] = count
        if self.budget is not None:
            error["budget"] = self.budget
        return body

    def openai_body(self) -> dict[str, object]:
        return self._extended(super().openai_body())

    def anthropic_body(self) -> dict[str, object]:
        return self._extended(super().anthropic_body())

    def gemini_body(self) -> dict[str, object]:
        return self._extended(super().gemini_body())


class PermissionDenied(GatewayError):
    status = 403
    type = "permission_error"
    anthropic_type = "permission_error"
    retryable = False


class ModelNotFound(GatewayError):
    status = 404
    type = "invalid_request_error"
    anthropic_type = "not_found_error"
    retryable = False

    def __init__(self, model: str) -> None:
        super().__init__(f"The model `{model}` does not exist or you do not have access to it.", param="model")


class EndpointNotServed(GatewayError):
    """A configured model asked for at an endpoint it does not serve (``Model.endpoints``): 404, as
    a model that is not there at all, so a client is never served (or billed) by an endpoint its
    model has no price for."""

    status = 404
    type = "invalid_request_error"
    anthropic_type = "not_found_error"
    retryable = False

    def __init__(self, model: str, path: str) -> None:
        super().__init__(f"The model `{model}` does not serve {path}.", param="model", code="model_not_found")


class NotFound(GatewayError):
    status = 404
    type = "invalid_request_error"
    anthropic_type = "not_found_error"
    retryable = False


class Conflict(GatewayError):
    """An Idempotency-Key reused for a different request, or while its first attempt still runs."""

    status = 409
    type = "invalid_request_error"
    anthropic_type = "invalid_request_error"
    retryable = False


class RequestTimeout(GatewayError):
    """The client did not send its request in time (``body_timeout``); the connection is closed."""

    status = 408
    type = "invalid_request_error"
    anthropic_type = "invalid_request_error"
    retryable = False


class RequestTooLarge(GatewayError):
    """A request body over ``max_request_bytes``: refused before the rest of it is read, and the
    connection closed, so that what the client still sends is not read either."""

    status = 413
    type = "invalid_request_error"
    anthropic_type = "request_too_large"
    retryable = False


class HeadersTooLarge(GatewayError):
    """A request head over ``max_header_bytes`` or ``max_headers``; the connection is closed."""

    status = 431
    type = "invalid_request_error"
    anthropic_type = "invalid_request_error"
    retryable = False


class RateLimited(GatewayError):
    status = 429
    type = "rate_limit_error"
    anthropic_type = "rate_limit_error"


class UpstreamFailure(GatewayError):
    """The upstream provider failed; nothing was charged."""

    status = 502
    type = "server_error"


class ServiceUnavailable(GatewayError):
    status = 503
    type = "server_error"


class Overloaded(GatewayError):
    """The upstream provider is overloaded (Anthropic's 529); transient."""

    status = 503
    type = "server_error"
    anthropic_type = "overloaded_error"
