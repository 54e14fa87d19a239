"""The embeddings model the end-to-end tests and the fuzzers add to a gateway's configuration."""

from __future__ import annotations

#: The name the fake upstream knows the embeddings model by.
DEPLOYED = "text-embedding-x"


def embeddings_model(upstream_base_url: str, pricing: str = "{input = 0.135}", model_id: str = "fake-embedding") -> str:
    """A ``[[models]]`` table serving embeddings only, on the fake upstream (0.135 USD per million input tokens)."""
    return f"""
[[models]]
id = "{model_id}"
display_name = "Fake Embedding"
owned_by = "acme"
context_window = 8191
max_output_tokens = 1
endpoints = ["embeddings"]
pricing = {pricing}
upstream = {{kind = "openai", base_url = "{upstream_base_url}", api_key_env = "UPSTREAM_KEY", model = "{DEPLOYED}"}}
"""
