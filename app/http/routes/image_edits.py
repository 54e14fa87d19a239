"""POST /v1/images/edits: OpenAI's image edits (multipart), billed to the caller's team.

Authenticate → read the form as it arrives (``app/http/multipart.py``: bounded, its files spooled,
never whole in memory) → the fields Tollgate judges (model, prompt, n, size, quality,
response_format; one ``image`` or several ``image[]``, an optional ``mask``) → find the model and
check the key may use it here → the billed image call (``app/http/image_call.py``): held as a
generation is, plus each input image at its bound for a token-priced model, the form sent on as a
stream with the deployment's name of the model, charged for the images returned (or the tokens
reported). Every other field goes upstream untouched.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, post

from app.errors import InvalidRequest
from app.http.image_call import ImageRequest, serve_image_edit
from app.http.multipart import Form, FormLimits, read_form
from app.http.routes.auth import authenticate, authorize
from app.http.routes.images import ImageGeneration, image_ask
from app.http.routes.request_body import validate
from app.http.routes.served import served_model
from app.runtime import Runtime
from domain import endpoints

#: The most input images one edit takes (OpenAI's GPT image models take 16).
MAX_INPUT_IMAGES = 16
#: The largest input image (OpenAI's limit for GPT image models: 50 MB each, within max_upload_bytes).
MAX_IMAGE_BYTES = 50 * 1024 * 1024
#: The form's text fields Tollgate reads, and those that must be numbers.
_READ = ("model", "prompt", "n", "size", "quality", "response_format", "stream")


def _fields(form: Form) -> dict[str, Any]:
    """The form's text fields Tollgate reads, typed as the JSON endpoint's (``n`` a number,
    ``stream`` a boolean), for the same checks."""
    fields: dict[str, Any] = {name: form.value(name) for name in _READ if form.value(name) is not None}
    if "n" in fields:
        if not fields["n"].strip().isdigit():
            raise InvalidRequest(f"Invalid 'n': {fields['n']!r} is not a whole number.", param="n")
        fields["n"] = int(fields["n"])
    if "stream" in fields:
        fields["stream"] = fields["stream"].strip().lower() == "true"
    return fields


def _input_images(form: Form) -> int:
    """How many images the form carries (``image``, or ``image[]`` for several), within bounds."""
    images = form.files("image") + form.files("image[]")
    if not images:
        raise InvalidRequest("Missing required parameter: 'image'.", param="image")
    if len(images) > MAX_INPUT_IMAGES:
        raise InvalidRequest(f"At most {MAX_INPUT_IMAGES} images may be edited at once.", param="image")
    if len(form.files("mask")) > 1:
        raise InvalidRequest("At most one 'mask' may be sent.", param="mask")
    return len(images)


@post("/v1/images/edits", status_code=200)
async def edit_image(request: Request[Any, Any, Any]) -> Response[bytes]:
    runtime: Runtime = request.app.state.runtime
    principal = await authenticate(request, runtime)
    with await read_form(request, FormLimits.of(runtime.settings, MAX_IMAGE_BYTES)) as form:
        fields = _fields(form)
        for name in ("model", "prompt"):
            if name not in fields:
                raise InvalidRequest(f"Missing required parameter: '{name}'.", param=name)
        parsed = validate(fields, ImageGeneration)
        model = served_model(runtime.settings, parsed.model, endpoints.IMAGES_EDITS)
        authorize(principal, model.id, endpoints.IMAGES_EDITS)
        ask = image_ask(parsed, _input_images(form))
        edit = ImageRequest(principal, model, endpoints.IMAGES_EDITS, "/images/edits", fields, form.digest(), ask)
        return await serve_image_edit(runtime, request, edit, form)
