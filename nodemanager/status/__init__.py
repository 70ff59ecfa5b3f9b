"""The ops status endpoint and the Prometheus metrics."""
