"""Translation between wire protocols, through one canonical request/response model.

Each protocol has a codec module that converts between its wire format and :mod:`.canonical`:
``chat`` (OpenAI Chat Completions), ``messages`` (Anthropic Messages) and ``responses`` (OpenAI
Responses, inbound only). A request in one protocol reaches an upstream speaking another by going
inbound codec → canonical → upstream codec, and its answer comes back the same way.
"""
