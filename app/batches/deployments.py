"""Which deployment of a model runs its batches, and the client that speaks to it.

A batch runs where it was created, start to end: its row keeps the deployment's index among the
model's ``upstreams``, so every later poll, cancel and output read goes to the same provider account.
"""

from __future__ import annotations

import os

from app.upstream.anthropic_batches import AnthropicBatches
from app.upstream.openai_batches import OpenAIBatches
from domain.settings import Model, Upstream

#: The upstream kinds that serve each batch API.
OPENAI_KINDS = frozenset({"openai", "openai-responses"})
ANTHROPIC_KINDS = frozenset({"anthropic"})


def batch_deployment(model: Model, kinds: frozenset[str]) -> int | None:
    """The index of the model's first deployment of ``kinds`` (None: it has none; no batches)."""
    return next((i for i, up in enumerate(model.deployments) if up.kind in kinds and up.base_url), None)


def deployment_at(model: Model, index: int) -> Upstream:
    return model.deployments[index]


def api_key_of(upstream: Upstream) -> str | None:
    return os.environ.get(upstream.api_key_env) if upstream.api_key_env else None


def openai_client(model: Model, index: int) -> OpenAIBatches:
    upstream = deployment_at(model, index)
    return OpenAIBatches(upstream.base_url or "", api_key_of(upstream))


def anthropic_client(model: Model, index: int) -> AnthropicBatches:
    upstream = deployment_at(model, index)
    return AnthropicBatches(upstream.base_url or "", api_key_of(upstream))
