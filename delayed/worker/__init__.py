"""The worker: delayed.worker.loop is its loop; the other modules are its parts (slots, batch,
holding, keep-alive, time limit, retry, allowlist, supervisor) and cli its command line."""
from .loop import DEFAULT_BATCH, Worker

__all__ = ["DEFAULT_BATCH", "Worker"]
