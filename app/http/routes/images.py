"""POST /v1/images/generations: OpenAI's image generation, billed to the caller's team.

Authenticate → read the fields Tollgate judges (model, prompt, n, size, quality, response_format)
→ find the model and check the key may use it here → the billed image call
(``app/http/image_call.py``): held for ``n`` images at the dearest price the request allows,
charged for the images returned (or the tokens reported), answered with ``usage.cost`` and
``usage.remaining``. Every other field (style, background, output_format, moderation, user, …)
goes upstream untouched.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Request, Response, post

from app.errors import InvalidRequest
from app.http.image_call import ImageRequest, serve_images
from app.http.routes.auth import authenticate, authorize
from app.http.routes.request_body import note_stream, read_json_object, require, validate
from app.http.routes.served import served_model
from app.runtime import Runtime
from domain import endpoints
from domain.image_pricing import ImageAsk

#: The most images one request may ask for (OpenAI's own limit).
MAX_IMAGES = 10
#: The longest prompt, in characters (OpenAI's longest, the GPT image models').
MAX_PROMPT_CHARS = 32_000
RESPONSE_FORMATS = ("url", "b64_json")


class ImageGeneration(msgspec.Struct):
    """The fields Tollgate itself reads; every other field passes through untouched."""

    model: str
    prompt: str
    n: int | None = None
    size: str | None = None
    quality: str | None = None
    response_format: str | None = None
    stream: bool | None = None


def image_ask(request: ImageGeneration, input_images: int = 0) -> ImageAsk:
    """What the request asks, its count and prompt within bounds (its size and quality are checked
    against the model's price table where it is held, ``app/http/image_call.py``)."""
    n = 1 if request.n is None else request.n
    if not 1 <= n <= MAX_IMAGES:
        raise InvalidRequest(f"Invalid 'n': expected a value between 1 and {MAX_IMAGES}, but got {n}.", param="n")
    if not request.prompt:
        raise InvalidRequest("'prompt' must not be empty.", param="prompt")
    if len(request.prompt) > MAX_PROMPT_CHARS:
        raise InvalidRequest(
            f"'prompt' is {len(request.prompt)} characters long; at most {MAX_PROMPT_CHARS} are allowed.",
            param="prompt",
        )
    if request.response_format is not None and request.response_format not in RESPONSE_FORMATS:
        raise InvalidRequest(
            f"Invalid 'response_format': {request.response_format!r}; expected 'url' or 'b64_json'.",
            param="response_format",
        )
    if request.stream:
        raise InvalidRequest("Streamed image generation is not served; leave 'stream' out.", param="stream")
    return ImageAsk(request.size, request.quality, n, len(request.prompt.encode()), input_images)


@post("/v1/images/generations", status_code=200)
async def create_image(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    raw = await request.body()
    body = read_json_object(raw, runtime.settings.max_json_depth)
    note_stream(body)
    require(body, "model", "prompt")
    parsed = validate(body, ImageGeneration)
    model = served_model(runtime.settings, parsed.model, endpoints.IMAGES_GENERATIONS)
    authorize(principal, model.id, endpoints.IMAGES_GENERATIONS)
    ask = image_ask(parsed)
    asked = ImageRequest(principal, model, endpoints.IMAGES_GENERATIONS, "/images/generations", body, raw, ask)
    return await serve_images(runtime, request, asked)
