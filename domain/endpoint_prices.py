"""What each endpoint bills, so that a model serving it has a price for every quantity billed.

Nothing is ever free by accident: a model declares the endpoints it serves (``Model.endpoints``),
each endpoint here the `pricing` fields it bills, and a configuration (or price list file) whose
model serves an endpoint without a price for one of them is refused, naming the file and the key
(``check_endpoint_prices``, called by ``domain/settings_checks.py`` and ``domain/price_list.py``).
An endpoint not registered here is not served at all: a model naming it is refused too.

A new endpoint plugs in with one entry in ``BILLING`` (and its price fields on ``Pricing``): the
quantities it bills, each a tuple of `pricing` fields any one of which prices it (``each("input")``
for plain ones), the quantities a price brings with it when set (a transcription priced per token
bills text tokens too), and the upstream kinds that serve it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from domain import endpoints

#: One quantity an endpoint bills: the `pricing` fields that may price it (any one set will do: a
#: transcription may be priced per second or per token).
Requirement = tuple[str, ...]
#: Reports a broken rule, as ``domain/settings_checks.Fail`` (it raises).
Fail = Callable[[str, str], None]

#: The upstream kinds that speak OpenAI's own endpoints beyond chat (embeddings, images, audio, files).
OPENAI_KINDS = frozenset({"openai", "demo"})


def each(*fields: str) -> tuple[Requirement, ...]:
    """Quantities each priced by one field of its own (``each("input", "output")``)."""
    return tuple((name,) for name in fields)


@dataclass(frozen=True, slots=True)
class Billing:
    """What an endpoint bills and who serves it."""

    #: Every quantity the endpoint bills; a model serving it must price each.
    quantities: tuple[Requirement, ...]
    #: The upstream kinds (``Upstream.kind``) that serve the endpoint; ``None``: every kind.
    kinds: frozenset[str] | None = None
    #: A `pricing` field → the quantities the endpoint bills too once that field is set.
    implied: Mapping[str, tuple[Requirement, ...]] = field(default_factory=dict)

    def required(self, pricing: object) -> tuple[Requirement, ...]:
        """The quantities a model serving the endpoint at ``pricing`` must price."""
        extra = [needs for name, needs in self.implied.items() if not missing(getattr(pricing, name, None))]
        return self.quantities + tuple(q for needs in extra for q in needs)


_TOKENS = each("input", "output", "cache_create", "cache_hit")
#: A transcription: per second of audio, or per audio token (``audio_input``), which then bills the
#: prompt's text tokens (``input``) and the transcript's (``output``) too.
_TRANSCRIBED = Billing((("audio_second", "audio_input"),), OPENAI_KINDS, {"audio_input": each("input", "output")})

#: Endpoint → what it bills. Keep one entry per line, each under its own comment line, so branches
#: adding endpoints side by side do not touch the same lines.
BILLING: Mapping[str, Billing] = {
    # Chat completions: prompt (plain, cache writes, cache hits) and output tokens.
    endpoints.CHAT: Billing(_TOKENS),
    # The Responses API: as chat.
    endpoints.RESPONSES: Billing(_TOKENS),
    # Anthropic messages: as chat.
    endpoints.MESSAGES: Billing(_TOKENS),
    # Gemini's generateContent: as chat.
    endpoints.GENERATE_CONTENT: Billing(_TOKENS),
    # Embeddings: input tokens only.
    endpoints.EMBEDDINGS: Billing(each("input"), OPENAI_KINDS | {"azure-openai"}),
    # Images, generations: each image by its SIZE/QUALITY price (also what a token-priced model is held at).
    endpoints.IMAGES_GENERATIONS: Billing((("images",),), OPENAI_KINDS),
    # Images, edits: as generations.
    endpoints.IMAGES_EDITS: Billing((("images",),), OPENAI_KINDS),
    # Audio transcriptions: seconds of audio, or audio and text tokens.
    endpoints.AUDIO_TRANSCRIPTIONS: _TRANSCRIBED,
    # Audio translations: as transcriptions.
    endpoints.AUDIO_TRANSLATIONS: _TRANSCRIBED,
    # Audio speech: characters of input.
    endpoints.AUDIO_SPEECH: Billing(each("input_characters"), OPENAI_KINDS),
    # Batches: the batches branch registers its entry here.
}


def missing(value: object) -> bool:
    """Whether a `pricing` field gives no price: unset, or an empty table."""
    return value is None or (isinstance(value, Mapping | list | tuple) and not value)


def check_endpoint_prices(
    served: list[str], pricing: object, key: str, fail: Fail, registry: Mapping[str, Billing] = BILLING
) -> None:
    """Each endpoint of ``served`` (a model's ``endpoints``, the model's key ``key``) is one this
    gateway bills (``registry``), and ``pricing`` prices every quantity it bills."""
    if not served:
        fail(f"{key}.endpoints", "must name at least one endpoint the model serves")
    for endpoint in served:
        billing = registry.get(endpoint)
        if billing is None:
            known = ", ".join(registry)
            fail(f"{key}.endpoints", f"unknown or unserved endpoint {endpoint!r}; expected some of {known}")
            return
        if served.count(endpoint) > 1:
            fail(f"{key}.endpoints", f"endpoint {endpoint!r} is named twice")
        for requirement in billing.required(pricing):
            if all(missing(getattr(pricing, name, None)) for name in requirement):
                fields = " or ".join(f"{key}.pricing.{name}" for name in requirement)
                fail(
                    f"{key}.pricing.{requirement[0]}",
                    f"required: the model serves {endpoint}, which bills it (set {fields}); "
                    "a quantity without a price would be served free",
                )


def check_endpoint_kinds(served: list[str], kinds: list[tuple[str, str]], key: str, fail: Fail) -> None:
    """Every deployment of a model (``kinds``: each one's key and kind) can serve its endpoints."""
    for endpoint in served:
        billing = BILLING.get(endpoint)
        if billing is None or billing.kinds is None:
            continue
        for where, kind in kinds:
            if kind not in billing.kinds:
                fail(
                    f"{where}.kind",
                    f"kind {kind!r} does not serve {endpoint} (the model's endpoints name it); "
                    f"expected one of {', '.join(sorted(billing.kinds))}",
                )
