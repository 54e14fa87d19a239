"""Alerts delivered to webhooks (``webhooks.py``), from the outbox the events feed (``projections/alerts.py``)."""
