"""A worker's background duties (its keep-alive, moving due tasks) each run in a thread of this shape."""
import logging
import threading
from typing import Any, Callable, Optional

from ..runtime.backoff import Outage, OutageBackoff
from ..runtime.lifecycle import Lifecycle
from ..runtime.role import rounds

logger = logging.getLogger(__name__)


class Every(threading.Thread):
    """Calls duty() every interval seconds, the first time one interval in, until stop(); Redis
    errors are ridden out as a role's are (see delayed.runtime.role), said by outage (a worker's
    threads share its one)."""

    def __init__(self, interval: float, duty: Callable[[], Any], what: str, outage: Optional[Outage] = None) -> None:
        super().__init__(name=f"delayed {what}", daemon=True)
        self._interval = interval
        self._duty = duty
        self._lifecycle = Lifecycle(what)
        self._outage = OutageBackoff(logger, what, wait=self._lifecycle.wait, outage=outage)

    def run(self) -> None:
        if not self._lifecycle.wait(self._interval):
            rounds(self._lifecycle, self._outage, self._round)

    def _round(self) -> float:
        self._duty()
        return self._interval

    def stop(self) -> None:
        self._lifecycle.stop()
        self.join()
