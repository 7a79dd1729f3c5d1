"""The worker: delayed.worker.loop is its loop; middleware its pipeline, around invoke's call and
decide's settlement; the other modules are its parts (run, callee, slots, batch, holding, keep-alive,
and the middleware's features: allowlist, time limit, retry, tracking, metrics, task log), supervisor
its processes and cli its command line."""
from .loop import DEFAULT_BATCH, Worker

__all__ = ["DEFAULT_BATCH", "Worker"]
