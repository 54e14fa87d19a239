"""The ledger at scale (issue #16): ``python -m scripts.ledger_scale``, see ``run.py``."""
