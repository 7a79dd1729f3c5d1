"""A worker's background duties (its keep-alive, moving due tasks) each run in a thread of this shape."""
import logging
import threading
from typing import Any, Callable

import redis

from ..runtime.backoff import OutageBackoff

logger = logging.getLogger(__name__)


class Every(threading.Thread):
    """Calls duty() every interval seconds until stop(); Redis errors are ridden out with a
    OutageBackoff, which says once that Redis is gone and once that it is back."""

    def __init__(self, interval: float, duty: Callable[[], Any], what: str) -> None:
        super().__init__(name=f"delayed {what}", daemon=True)
        self._interval = interval
        self._duty = duty
        self._what = what
        self._stopped = threading.Event()

    def run(self) -> None:
        backoff = OutageBackoff(logger, self._what, wait=self._stopped.wait)
        while not self._stopped.wait(self._interval):
            try:
                self._duty()
            except redis.RedisError as exc:
                backoff.failed(exc)
            else:
                backoff.succeeded()

    def stop(self) -> None:
        self._stopped.set()
        self.join()
