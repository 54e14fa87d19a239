"""What an operator watches: Prometheus metrics, one JSON log line per request, the request id."""
