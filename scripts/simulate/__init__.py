"""The deterministic simulator of the ledger core (``python -m scripts.simulate``): see world.py."""
