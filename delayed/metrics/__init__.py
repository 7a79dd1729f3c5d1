"""Prometheus metrics (the `metrics` extra: prometheus-client), in two parts.

- delayed.metrics.tasks: what workers did, counted as it happens (`python -m delayed.worker
  --metrics-port PORT`).
- delayed.metrics.queues: what the queues hold, read from Redis at each scrape (`python -m
  delayed.metrics --port PORT`).

prometheus_client is imported only once metrics are asked for: without it the package imports
and the worker runs.
"""
import importlib.util
import socket
from typing import Optional


def unavailable(port: int) -> Optional[str]:
    """Why metrics cannot be served on port (prometheus-client missing, or the port taken), else None;
    for a one-line error at start rather than a traceback."""
    if importlib.util.find_spec("prometheus_client") is None:
        return "metrics need prometheus-client: pip install 'delayed[metrics]'"
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as prometheus_client's server does
        try:
            sock.bind(("", port))
        except OSError as exc:
            return f"cannot serve metrics on port {port}: {exc.strerror}"
    return None
