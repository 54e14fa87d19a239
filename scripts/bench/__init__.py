"""The gateway benchmark of issue #6: Tollgate against a bare proxy and the upstream itself (run.py)."""
