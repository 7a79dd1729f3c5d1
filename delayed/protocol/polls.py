"""How often a handle looks at a record while it waits for a task or a workflow to end."""
import math
import time
from typing import Iterator, Optional

FIRST_POLL, MAX_POLL = 0.005, 0.5
"""result() looks at the record after 5 ms, then twice as long each time, at most every 0.5 s."""


def polls(timeout: Optional[float]) -> Iterator[float]:
    """How long to sleep before each next look at a record; stops once timeout seconds have passed."""
    deadline = None if timeout is None else time.monotonic() + timeout
    wait = FIRST_POLL
    while True:
        left = math.inf if deadline is None else deadline - time.monotonic()
        if left <= 0:
            return
        yield min(wait, left)
        wait = min(2 * wait, MAX_POLL)
