"""Claimed tasks not yet started, with a watcher against head-of-line blocking: once none of them
has started for the batch time (the one-slot worker's running task is slow; every slot of a
threaded worker is busy), the watcher gives them back to the head of the queue (give_back.lua,
fenced on id and blob), where another worker, or this one once a slot frees, takes them.

The runners take the next task from the left of a deque and the watcher takes what it gives back
from the right, one atomic pop at a time: each claimed task is either started or given back,
never both, and the runners' hot path takes no lock.
"""
import threading
import time
from collections import deque
from typing import Callable, Deque, Generic, List, Optional, Sequence, TypeVar

Item = TypeVar("Item")
"""A claimed task as the worker keeps it: a Claim, or a Job ready to run in a slot."""


class Batch(Generic[Item]):
    """Claimed tasks waiting to start; next() hands them out in order (from any thread).

    give_back: returns tasks not started to the head of the queue (called from the watcher's thread).
    """

    def __init__(self, give_back: Callable[[List[Item]], None], patience: float) -> None:
        self._give_back = give_back
        self._patience = patience
        self._pending: Deque[Item] = deque()
        self._since = 0.0  # when a task last started (or was claimed into an empty batch)
        self._waiting = threading.Event()  # set while claimed tasks may wait behind a running one
        self._closed = False
        self._stopped = False
        self.given_back = 0  # tasks given back so far
        self._watcher = threading.Thread(target=self._watch, name="delayed batch watcher", daemon=True)
        self._watcher.start()

    @property
    def waiting(self) -> int:
        """How many claimed tasks wait to start."""
        return len(self._pending)

    def load(self, claims: Sequence[Item], starting_now: int = 1) -> None:
        """Add claimed tasks, of which the caller starts starting_now at once (those need no watching).
        The tasks already waiting keep their time: the watcher's bound holds for them too."""
        if not self._pending:
            self._since = time.monotonic()
        self._pending.extend(claims)
        if len(self._pending) > starting_now and not self._waiting.is_set():
            self._waiting.set()

    def next(self) -> Optional[Item]:
        """The next claimed task, now started; None when the batch is done, was given back, or stopped."""
        if self._stopped:
            return None
        try:
            claim = self._pending.popleft()
        except IndexError:
            return None
        self._since = time.monotonic()
        return claim

    def stop(self) -> None:
        """Start no more of the tasks: next() says None from now on (the caller gives back the rest)."""
        self._stopped = True

    def rest(self) -> List[Item]:
        """Take the tasks not started (at a stop: the caller gives them back)."""
        return self._take()

    def close(self) -> None:
        self._closed = True
        self._waiting.set()
        self._watcher.join()

    def _take(self) -> List[Item]:
        taken: List[Item] = []
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
                self._give_back(claims)


class Lookahead:
    """How many claimed tasks a threaded worker keeps ready for its next free slots, so a slot that
    frees starts a task without a round trip to Redis: as many as should start within 0.8 of the
    patience (slots free at size / mean run time, or all at once when tasks run in step), at most
    one per slot; none until a first task has finished, and none after the watcher gave tasks back
    (the guess was wrong) until another one finishes.
    """

    SMOOTHING = 0.1
    """Weight of the latest run time in the mean."""
    MARGIN = 0.8

    def __init__(self, size: int, patience: float) -> None:
        self._size = size
        self._within = self.MARGIN * patience
        self.mean: Optional[float] = None
        """Seconds a task runs, smoothed; None until one has finished."""
        self._given_back = 0
        self._held_off = False

    def finished(self, seconds: float) -> None:
        """A task ran for seconds."""
        self.mean = seconds if self.mean is None else self.mean + self.SMOOTHING * (seconds - self.mean)
        self._held_off = False

    def ahead(self, given_back: int) -> int:
        """How many tasks may wait now; given_back: the batch's count of tasks its watcher gave back."""
        if given_back != self._given_back:
            self._given_back, self._held_off = given_back, True
        if self._held_off or self.mean is None:
            return 0
        return min(self._size, int(self._within * self._size / max(self.mean, 1e-6)))
