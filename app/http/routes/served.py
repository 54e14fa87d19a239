"""The model a request asks for, at the endpoint it asked: the one check every billed route makes.

A model serves the endpoints its configuration names (``Model.endpoints``; unset, the generation
endpoints), and only those have a price the configuration check vouched for
(``domain/endpoint_prices.py``). A request for a model that is not configured, or that does not
serve the endpoint, is a 404 in the endpoint's own error shape (the exception handler renders it
by the path: Anthropic's for ``/v1/messages``, OpenAI's for every other).
"""

from __future__ import annotations

from app.errors import EndpointNotServed, ModelNotFound
from domain.endpoints import ENDPOINT_PATHS
from domain.settings import Model, Settings


def served_model(settings: Settings, model_id: str, endpoint: str) -> Model:
    """The configured model ``model_id`` if it serves ``endpoint`` (a name of ``domain/endpoints.py``);
    404 otherwise (:class:`ModelNotFound`, :class:`EndpointNotServed`)."""
    model = settings.model(model_id)
    if model is None:
        raise ModelNotFound(model_id)
    if not model.serves(endpoint):
        raise EndpointNotServed(model.id, ENDPOINT_PATHS.get(endpoint, endpoint))
    return model
