"""AWS Bedrock's Converse API: an upstream's side only (``upstream.py``), since no client speaks it."""
