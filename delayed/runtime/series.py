"""A Prometheus metric family declared once: the worker and the exporter build their metrics from it,
and the docs' list of metrics is made from it."""
from typing import NamedTuple, Tuple


class Series(NamedTuple):
    """One metric family, as /metrics exposes it."""

    name: str
    """As exposed: a counter's ends in _total."""
    kind: str
    """counter, gauge or histogram."""
    labels: Tuple[str, ...]
    help: str
