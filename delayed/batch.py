"""A one-slot worker's claimed batch, run one task after another, with a watcher against head-of-line
blocking: once the running task has taken longer than the batch time, the watcher gives the
claimed tasks not yet started back to the head of the queue (give_back.lua, fenced on id and
blob), where another worker, or this one after the slow task, takes them.

The runner takes the next task from the left of a deque and the watcher takes what it gives back
from the right, one atomic pop at a time: each claimed task is either started or given back,
never both, and the runner's hot path takes no lock.
"""
import threading
import time
from collections import deque
from typing import Deque, List, Optional, Sequence

from .holding import Claim, Holding


class Batch:
    """The claimed tasks of the current round trip; next() hands them out in order."""

    def __init__(self, holding: Holding, patience: float) -> None:
        self._holding = holding
        self._patience = patience
        self._pending: Deque[Claim] = deque()
        self._since = 0.0  # when the running task started
        self._waiting = threading.Event()  # set while claimed tasks may wait behind a running one
        self._closed = False
        self.given_back = 0  # tasks given back so far
        self._watcher = threading.Thread(target=self._watch, name="delayed batch watcher", daemon=True)
        self._watcher.start()

    def load(self, claims: Sequence[Claim]) -> None:
        self._since = time.monotonic()  # (the first task starts now; a stale time would give all back)
        self._pending.extend(claims)
        if len(claims) > 1 and not self._waiting.is_set():
            self._waiting.set()

    def next(self) -> Optional[Claim]:
        """The next claimed task, now started; None when the batch is done or was given back."""
        try:
            claim = self._pending.popleft()
        except IndexError:
            return None
        self._since = time.monotonic()
        return claim

    def rest(self) -> List[Claim]:
        """Take the tasks not started (at a stop: the caller gives them back)."""
        return self._take()

    def close(self) -> None:
        self._closed = True
        self._waiting.set()
        self._watcher.join()

    def _take(self) -> List[Claim]:
        taken: List[Claim] = []
        while True:
            try:
                taken.append(self._pending.pop())
            except IndexError:
                return taken[::-1]

    def _watch(self) -> None:
        while True:
            self._waiting.wait()
            if self._closed:
                return
            if not self._pending:
                self._waiting.clear()
                if self._pending:  # loaded meanwhile: look again
                    self._waiting.set()
                continue
            late = self._since + self._patience - time.monotonic()
            if late > 0:
                time.sleep(late)
                continue
            claims = self._take()
            if claims:
                self.given_back += len(claims)
                self._holding.give_back(claims)
