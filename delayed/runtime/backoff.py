"""Riding out a Redis outage: sleeps that grow while Redis fails, and the outage said once gone, once back."""
import logging
import threading
from typing import Any, Callable, Optional

from ..protocol.redis_errors import error_text


class Outage:
    """Whether Redis is gone, as a process's threads see it: the first failure says so (one
    WARNING), the first success after it says Redis is back; the threads sharing it say nothing
    more. Thread-safe."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self._logger = logger
        self._what = what
        self._lock = threading.Lock()
        self.failing = False

    def failed(self, exc: Exception) -> None:
        with self._lock:
            if self.failing:
                return
            self.failing = True
        self._logger.warning("%s: Redis error (%s); retrying until it is back", self._what, error_text(exc))

    def succeeded(self) -> None:
        with self._lock:
            if not self.failing:
                return
            self.failing = False
        self._logger.warning("%s: Redis is back", self._what)


class OutageBackoff:
    """Sleeps that double after each consecutive Redis failure; the outage said once gone and once
    back, by outage (default: one of its own; a worker's threads share one, so a process says it once).

    wait: how to sleep (a Lifecycle's or an Event's wait, so a stop cuts the sleep short).
    """

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        initial: float = 0.1,
        maximum: float = 10.0,
        wait: Optional[Callable[[float], Any]] = None,
        outage: Optional[Outage] = None,
    ) -> None:
        self.outage = outage or Outage(logger, what)
        self._initial = self._delay = initial
        self._maximum = maximum
        self._wait = wait or threading.Event().wait
        self._failing = False

    @property
    def failing(self) -> bool:
        """Whether this backoff's last call failed."""
        return self._failing

    def failed(self, exc: Exception) -> None:
        self._failing = True
        self.outage.failed(exc)
        self._wait(self._delay)
        self._delay = min(self._delay * 2, self._maximum)

    def succeeded(self) -> None:
        """A call got through: if this backoff's last one had failed, Redis is back (a thread whose
        round did not need Redis says nothing)."""
        if self._failing:
            self._failing = False
            self._delay = self._initial
            self.outage.succeeded()
