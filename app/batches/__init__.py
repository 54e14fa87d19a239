"""Batches: OpenAI's Batch API and Anthropic's message batches, held, polled and charged line by line."""
