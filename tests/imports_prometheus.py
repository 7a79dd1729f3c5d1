"""A task module that imports prometheus_client as it is imported: before a supervisor sets
PROMETHEUS_MULTIPROC_DIR (the metrics must still be merged across its worker processes)."""
import prometheus_client  # noqa: F401
