"""Counting tokens offline: OpenAI's o200k_base tokenizer, vendored (``encoding``)."""
