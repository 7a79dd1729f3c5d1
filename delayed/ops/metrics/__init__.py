"""Prometheus metrics of the queues (the `metrics` extra: prometheus-client): what they hold, read
from Redis at each scrape (`python -m delayed.metrics --port PORT`; delayed.ops.metrics.queues).
What workers did is counted in the workers themselves (delayed.worker.metrics).

prometheus_client is imported only once metrics are asked for: without it the package imports
and the worker runs.
"""
