"""The documented `python -m delayed.metrics`: the queue exporter lives in delayed.ops.metrics."""
