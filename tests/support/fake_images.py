"""The fake upstream's image endpoint: ``POST /v1/images/generations`` as OpenAI answers it.

By the model the gateway sends (the deployment's name for it):

- ``dall-e-3``: sizes 1024x1024, 1792x1024, 1024x1792; quality ``standard`` (the default) or ``hd``;
  ``n`` must be 1; ``url`` (the default) or ``b64_json``; no ``usage`` in the answer.
- ``dall-e-2``: sizes 256x256, 512x512, 1024x1024; ``n`` up to 10; no ``usage``.
- ``gpt-image-*``: sizes 1024x1024, 1536x1024, 1024x1536 or ``auto`` (1024x1024); quality low, medium,
  high or ``auto`` (medium); always ``b64_json`` (``response_format`` is refused); the answer says
  ``size``, ``quality``, ``background``, ``output_format`` and ``usage`` (text tokens in, counted as
  the chat fake counts them; image tokens out per image by size and quality, as OpenAI publishes
  them; ``output_tokens_details`` except for ``gpt-image-1``, which sends none).

``POST /v1/images/edits`` takes OpenAI's multipart form (``image`` or several ``image[]``, ``mask``,
``prompt``, ``model``, ``n``, ``size``, ``quality``, ``response_format``) and answers as generations
do: ``dall-e-2`` takes one square PNG; a GPT image model up to 16 images, each counted as
``INPUT_IMAGE_TOKENS`` image tokens in its usage. The form, as the fake read it, is the request's
recorded body (its files by name, filename and size).

Directives in the prompt as in chat: ``[[fail:CODE]]``, ``[[latency:MS]]``, ``[[no-usage]]``.
Every image is ``IMAGE_BYTES`` of pseudo-random bytes, base64-encoded: large, as real answers are.
"""

from __future__ import annotations

import base64
import hashlib
import io
import time
from typing import Any

import multipart

from tests.support.fake_upstream import (
    _bad,
    _parse_directives,
    _Reject,
    _send_json,
    before_answering,
    error_body,
    openai_failure,
    openai_request,
    tokens,
)

#: The raw size of each fake image (its base64 is a third larger).
IMAGE_BYTES = 48 * 1024
DALL_E = {
    "dall-e-3": ({"1024x1024", "1792x1024", "1024x1792"}, {"standard", "hd"}, 1),
    "dall-e-2": ({"256x256", "512x512", "1024x1024"}, {"standard"}, 10),
}
GPT_IMAGE_SIZES = {"1024x1024", "1536x1024", "1024x1536"}
#: Image tokens generated per image, by quality: a square image, and a 1536-pixel one.
GPT_IMAGE_TOKENS = {"low": (272, 408), "medium": (1056, 1584), "high": (4160, 6240)}
#: The image tokens a GPT image model counts for each input image of an edit.
INPUT_IMAGE_TOKENS = 323
#: The most input images one edit takes (OpenAI's GPT image models).
MAX_INPUT_IMAGES = 16
Send = Any


def fake_image(prompt: str, index: int) -> str:
    """One image's base64: deterministic bytes from the prompt and the image's index."""
    seed = hashlib.sha256(f"{index}:{prompt}".encode()).digest()
    return base64.b64encode((seed * (IMAGE_BYTES // len(seed) + 1))[:IMAGE_BYTES]).decode()


def output_tokens_per_image(size: str, quality: str) -> int:
    """The image tokens a GPT image model generates for one image of ``size`` at ``quality``."""
    square, large = GPT_IMAGE_TOKENS[quality]
    return square if size == "1024x1024" else large


async def handle_image_generation(api_key: str | None, raw: bytes, headers: dict[str, str], send: Send) -> None:
    req = openai_request(api_key, raw, headers)
    if not isinstance(req, dict) or not isinstance(req.get("model"), str):
        raise _bad("you must provide a model parameter", "model")
    prompt = req.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise _bad("Missing required parameter: 'prompt'.", "prompt")
    text, d = _parse_directives(prompt)
    await before_answering(d)
    if d.fail is not None:
        raise openai_failure(d.fail, f"fake upstream failure {d.fail}")
    model, n = req["model"], req.get("n", 1)
    if not isinstance(n, int) or not 1 <= n <= 10:
        raise _bad(f"Invalid 'n': {n!r}.", "n")
    if model in DALL_E:
        answer = _dall_e(req, model, text, n)
    elif model.startswith("gpt-image"):
        answer = _gpt_image(req, model, text, n, d.no_usage)
    else:
        raise _Reject(
            404, error_body(f"The model '{model}' does not exist.", "invalid_request_error", "model_not_found")
        )
    await _send_json(send, 200, answer)


def read_form(raw: bytes, content_type: str) -> dict[str, Any] | None:
    """A multipart body as the fake records it: text fields by name (a repeated one as a list) and
    files as ``{"filename", "content_type", "size", "sha256"}`` (a list under ``image[]``); None
    when it is not multipart."""
    kind, options = multipart.parse_options_header(content_type)
    if kind != "multipart/form-data" or "boundary" not in options:
        return None
    form: dict[str, Any] = {}
    try:
        # kept in memory whole (the body already is): the parser's memory limit for all parts (8 MiB by
        # default) would otherwise spool a large upload's part to a temporary file
        parser = multipart.MultipartParser(
            io.BytesIO(raw),
            options["boundary"],
            len(raw),
            strict=True,
            spool_limit=len(raw) + 1,
            memory_limit=len(raw) + 1,
        )
        for part in parser:
            if part.filename is None:
                value: Any = part.value
            else:
                content = part.raw
                value = {
                    "filename": part.filename,
                    "content_type": part.content_type,
                    "size": len(content),
                    "sha256": hashlib.sha256(content).hexdigest(),
                }
            part.close()
            if part.name.endswith("[]"):
                form.setdefault(part.name, []).append(value)
            else:
                form[part.name] = value
    except multipart.MultipartError:
        return None
    return form


async def handle_image_edit(
    api_key: str | None, form: dict[str, Any] | None, headers: dict[str, str], send: Send
) -> None:
    """An edit, from the form ``read_form`` made of the body (None: not a multipart body, 400)."""
    if api_key is not None and headers.get("authorization") != f"Bearer {api_key}":
        raise _Reject(401, error_body("Incorrect API key provided", "invalid_request_error", "invalid_api_key"))
    if form is None:
        raise _bad("The request must be multipart/form-data.")
    images = [form["image"]] if isinstance(form.get("image"), dict) else form.get("image[]") or []
    if not images:
        raise _bad("Missing required parameter: 'image'.", "image")
    model, prompt = form.get("model") or "dall-e-2", form.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise _bad("Missing required parameter: 'prompt'.", "prompt")
    text, d = _parse_directives(prompt)
    await before_answering(d)
    if d.fail is not None:
        raise openai_failure(d.fail, f"fake upstream failure {d.fail}")
    req = {name: form[name] for name in ("size", "quality", "response_format", "output_format") if name in form}
    n = int(form.get("n", "1")) if str(form.get("n", "1")).isdigit() else 0
    if not 1 <= n <= 10:
        raise _bad(f"Invalid 'n': {form.get('n')!r}.", "n")
    if model == "dall-e-2":
        if len(images) != 1:
            raise _bad("dall-e-2 edits one image.", "image")
        answer = _dall_e(req, model, text, n)
    elif model.startswith("gpt-image"):
        if len(images) > MAX_INPUT_IMAGES:
            raise _bad(f"At most {MAX_INPUT_IMAGES} images may be edited at once.", "image")
        answer = _gpt_image(req, model, text, n, d.no_usage, input_images=len(images))
    else:
        raise _bad(f"The model '{model}' does not edit images.", "model")
    await _send_json(send, 200, answer)


def _dall_e(req: dict[str, Any], model: str, prompt: str, n: int) -> dict[str, Any]:
    sizes, qualities, most = DALL_E[model]
    size, quality = req.get("size") or "1024x1024", req.get("quality") or "standard"
    if size not in sizes:
        raise _bad(f"'{size}' is not one of {sorted(sizes)} - 'size'", "size")
    if quality not in qualities:
        raise _bad(f"'{quality}' is not one of {sorted(qualities)} - 'quality'", "quality")
    if n > most:
        raise _bad(f"Invalid 'n': {model} makes at most {most} image per request.", "n")
    as_url = req.get("response_format", "url") == "url"
    data = []
    for index in range(n):
        image = fake_image(prompt, index)
        data.append(
            {"url": f"https://images.example/{hashlib.sha256(image.encode()).hexdigest()[:16]}.png"}
            if as_url
            else {"b64_json": image}
        )
        data[-1]["revised_prompt"] = f"A picture of {prompt}"
    return {"created": int(time.time()), "data": data}


def _gpt_image(
    req: dict[str, Any], model: str, prompt: str, n: int, no_usage: bool, input_images: int = 0
) -> dict[str, Any]:
    if "response_format" in req:
        raise _bad("Unknown parameter: 'response_format'.", "response_format")
    size = req.get("size") or "auto"
    quality = req.get("quality") or "auto"
    size = "1024x1024" if size == "auto" else size
    quality = "medium" if quality == "auto" else quality
    if size not in GPT_IMAGE_SIZES:
        raise _bad(f"Invalid value: '{size}'. Supported values are: {sorted(GPT_IMAGE_SIZES)} and 'auto'.", "size")
    if quality not in GPT_IMAGE_TOKENS:
        raise _bad(f"Invalid value: '{quality}'. Supported values are: low, medium, high and auto.", "quality")
    answer: dict[str, Any] = {
        "created": int(time.time()),
        "background": "opaque",
        "data": [{"b64_json": fake_image(prompt, index)} for index in range(n)],
        "output_format": req.get("output_format") or "png",
        "quality": quality,
        "size": size,
    }
    if no_usage:
        return answer
    text_in, image_out = len(tokens(prompt)), n * output_tokens_per_image(size, quality)
    image_in = input_images * INPUT_IMAGE_TOKENS
    usage: dict[str, Any] = {
        "input_tokens": text_in + image_in,
        "input_tokens_details": {"image_tokens": image_in, "text_tokens": text_in},
        "output_tokens": image_out,
        "total_tokens": text_in + image_in + image_out,
    }
    if model != "gpt-image-1":
        usage["output_tokens_details"] = {"image_tokens": image_out, "text_tokens": 0}
    answer["usage"] = usage
    return answer
