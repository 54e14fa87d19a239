"""Images: the ``SIZE/QUALITY`` prices a request may be billed at, what its hold reserves, and
what its answer is charged.

A model's ``images`` table prices one image per ``SIZE/QUALITY`` (``1024x1024/standard``); its keys
are also the sizes and qualities the model offers, so a request naming another is refused before
anything is held. A request that leaves ``size`` or ``quality`` out, or says ``auto``, gets what the
provider then makes: the model's ``image_defaults`` when the operator set them, else any of the
table's values — the provider chooses, so the hold takes the dearest, and so does the charge unless
the answer says which it made (gpt-image answers carry ``size`` and ``quality``). Nothing is ever
billed at a price the table does not have.

Models whose answers report token usage (gpt-image) and that have image-token rates are charged by
those tokens: text in at ``input``, text out at ``output``, image tokens in and out at their own
rates. Their hold is still the table's dearest image per image asked for, plus the prompt and the
input images at the dearest the upstream could count them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from domain.money import round_up_to_micros
from domain.pricing import Price
from domain.settings import ImageDefaults
from domain.usage import TokenUsage

#: What ``size`` or ``quality`` says to leave the choice to the provider.
AUTO = "auto"
#: The most image tokens one input image of an edit is held for: the largest OpenAI's GPT image
#: models count one (a 1536x1024 image at high input fidelity); beyond it, the charge still takes
#: what the upstream reports.
INPUT_IMAGE_TOKENS_BOUND = 6_240
_HUNDRED = Decimal(100)
_MILLION = 1_000_000


class ImageOptionError(ValueError):
    """A size or quality the model does not offer: ``param`` names the request's field."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


@dataclass(frozen=True, slots=True)
class ImageAsk:
    """What an image request asks for, as its endpoint read it (``None``: left out)."""

    size: str | None
    quality: str | None
    #: Images asked for (``n``).
    n: int = 1
    #: Bytes of its prompt: at least as many as its text tokens, whatever the tokenizer.
    prompt_bytes: int = 0
    #: Input images (an edit's ``image`` parts).
    input_images: int = 0


def split(kind: str) -> tuple[str, str]:
    """``1024x1024/hd`` → (``1024x1024``, ``hd``)."""
    size, _, quality = kind.partition("/")
    return size, quality


def kinds_asked(price: Price, defaults: ImageDefaults | None, ask: ImageAsk) -> list[str]:
    """The table's ``SIZE/QUALITY`` prices the request may be billed at; raises
    :class:`ImageOptionError` for a size or quality the model does not offer."""
    defaults = defaults or ImageDefaults()
    sizes = sorted({split(kind)[0] for kind in price.images})
    qualities = sorted({split(kind)[1] for kind in price.images})
    size = _resolved(ask.size, defaults.size, sizes, "size")
    quality = _resolved(ask.quality, defaults.quality, qualities, "quality")
    chosen = [
        kind
        for kind in sorted(price.images)
        if (size is None or split(kind)[0] == size) and (quality is None or split(kind)[1] == quality)
    ]
    if not chosen:
        offered = ", ".join(q for s, q in map(split, sorted(price.images)) if size is None or s == size)
        raise ImageOptionError(
            "quality", f"The quality {quality!r} is not offered at size {size!r}; offered: {offered}."
        )
    return chosen


def _resolved(asked: str | None, default: str | None, offered: list[str], param: str) -> str | None:
    """The one value a field resolves to (None: any the table offers)."""
    value = default if asked is None or asked == AUTO else asked
    if value is not None and value not in offered:
        said = f"The {param} {value!r}" if value == asked else f"The default {param} {value!r}"
        raise ImageOptionError(param, f"{said} is not offered for this model; one of: {', '.join(offered)}.")
    return value


def token_priced(price: Price) -> bool:
    """Whether the model's answers are charged by their token usage (it has image-token rates)."""
    return price.image_output is not None


def worst_case_in_micros(
    price: Price, kinds: list[str], ask: ImageAsk, credits_per_usd: Decimal, adjustment: Decimal = Decimal(0)
) -> int:
    """What a hold reserves: ``n`` images at the dearest price the request allows, plus, for a
    token-priced model, every prompt byte as a text token and every input image at its bound."""
    per_image = max(price.images[kind] for kind in kinds)
    exact = ask.n * per_image * _MILLION
    if token_priced(price):
        exact += ask.prompt_bytes * price.input + ask.input_images * INPUT_IMAGE_TOKENS_BOUND * price.image_input_rate
    exact *= credits_per_usd
    return round_up_to_micros(exact + exact * adjustment / _HUNDRED if adjustment else exact)


@dataclass(frozen=True, slots=True)
class ImageAnswer:
    """What an image answer says about its cost: the images it returned, the size and quality it
    reports making (None: it did not say), and its ``usage`` object as sent (None: none)."""

    images: int
    size: str | None = None
    quality: str | None = None
    usage: Any = None


def usage_of(price: Price, kinds: list[str], answer: ImageAnswer) -> TokenUsage:
    """What an answer is charged for: its token usage, for a token-priced model that reported it;
    else each image returned at the price of the kind it was made at (the dearest the request
    allowed, unless the answer narrows it by the size and quality it reports)."""
    tokens = _token_usage(answer.usage) if token_priced(price) else None
    if tokens is not None:
        return tokens
    if not answer.images:
        return TokenUsage()
    made = [
        kind for kind in kinds if answer.size in (None, split(kind)[0]) and answer.quality in (None, split(kind)[1])
    ] or kinds  # a report outside what was asked narrows nothing: billed as asked
    dearest = max(made, key=lambda kind: (price.images[kind], kind))
    return TokenUsage(images=((dearest, answer.images),))


def _token_usage(usage: Any) -> TokenUsage | None:
    """An image answer's ``usage`` (``input_tokens``, ``output_tokens`` and their details' text and
    image tokens) as the kinds it is billed by; None when it does not report both counts. Tokens a
    detail leaves unexplained are billed as text in, and as image out (gpt-image-1 details no output)."""
    if not isinstance(usage, Mapping):
        return None
    total_in, total_out = _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))
    if total_in is None or total_out is None:
        return None
    image_in = _detail(usage.get("input_tokens_details"), "image_tokens", total_in)
    text_out = _detail(usage.get("output_tokens_details"), "text_tokens", total_out)
    return TokenUsage(
        input_tokens=total_in - image_in,
        output_tokens=text_out,
        image_input_tokens=image_in,
        image_output_tokens=total_out - text_out,
    )


def _count(value: Any) -> int | None:
    """A count as reported: a non-negative integer, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _detail(details: Any, name: str, total: int) -> int:
    """One detailed count, at most ``total`` (0 when not reported)."""
    value = _count(details.get(name)) if isinstance(details, Mapping) else None
    return 0 if value is None else min(value, total)
