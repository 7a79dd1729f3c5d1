"""Expiry in the worker: a task whose `expires` passed before a worker came to start it is never called.

The producer writes the moment into the blob (`expires_at`, unix seconds) as it enqueues the task; the
worker reads it from the one decode it makes of each task it claims, so nothing scans or decodes the
queue for it. A task that started once is not expired by its retries: the retry's blob no longer carries
the moment (delayed.worker.decide drops it).
"""
import time

from ..wire.dead_letter import Reason, expired_error
from .middleware import Middleware
from .run import Run


class Expiry(Middleware):
    """Refuses, as expired, a task past its expires_at: the first check after decoding, before the
    allowlist, so an expired task is never called whatever it names. A task without options (most) never
    gets here; one with options but no expiry pays one attribute read."""

    options_only = True

    def before(self, run: Run) -> None:
        task = run.task
        assert task is not None
        expires_at = task.options.expires_at
        if expires_at is None:
            return
        now = time.time()
        if now >= expires_at:
            run.refuse(Reason.EXPIRED, expired_error(expires_at, now), task.func_path)
