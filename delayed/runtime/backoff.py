"""Riding out a Redis outage: sleeps that grow while Redis fails, and the outage said once gone, once back."""
import logging
import threading
from typing import Any, Callable, Optional

from ..protocol.connection import error_text


class OutageBackoff:
    """Sleeps that double after each consecutive Redis failure; logs the outage and the recovery once each.

    wait: how to sleep (a Lifecycle's or an Event's wait, so a stop cuts the sleep short).
    """

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        initial: float = 0.1,
        maximum: float = 10.0,
        wait: Optional[Callable[[float], Any]] = None,
    ) -> None:
        self._logger = logger
        self._what = what
        self._initial = self._delay = initial
        self._maximum = maximum
        self._wait = wait or threading.Event().wait
        self.failing = False

    def failed(self, exc: Exception) -> None:
        if not self.failing:
            self._logger.warning("%s: Redis error (%s); retrying until it is back", self._what, error_text(exc))
            self.failing = True
        self._wait(self._delay)
        self._delay = min(self._delay * 2, self._maximum)

    def succeeded(self) -> None:
        if self.failing:
            self._logger.warning("%s: Redis is back", self._what)
            self.failing = False
            self._delay = self._initial
