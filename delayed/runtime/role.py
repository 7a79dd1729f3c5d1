"""The loop of a long-running role (the sweeper, the scheduler, a worker's background duties): a
round, then a wait, until a stop. A Redis error is ridden out (said once gone, once back), and a
stop cuts every wait short."""
import logging
from typing import Callable

import redis

from .backoff import OutageBackoff
from .lifecycle import Lifecycle


def rounds(lifecycle: Lifecycle, outage: OutageBackoff, work: Callable[[], float]) -> None:
    """Call work() until lifecycle is stopping, waiting the seconds it returns after each call, or
    outage's growing wait after a call that raised a Redis error."""
    while not lifecycle.stopping:
        try:
            pause = work()
        except redis.RedisError as exc:
            outage.failed(exc)
            continue
        outage.succeeded()
        lifecycle.wait(pause)


class Role:
    """A role run as a process of its own (the sweeper, the scheduler): rounds until stopped.

    A subclass says what it does as it goes online (starting) and does one round of it (round,
    which returns the seconds to wait before the next); round_name says what a round is, in the
    line a stop signal logs. lifecycle: its Lifecycle; outage: the OutageBackoff its rounds share.
    """

    def __init__(self, what: str, logger: logging.Logger, round_name: str) -> None:
        self.lifecycle = Lifecycle(what, finishing=f"the current {round_name}")
        self.outage = OutageBackoff(logger, what, wait=self.lifecycle.wait)
        self._logger = logger

    def run(self, handle_signals: bool = True) -> int:
        """Run rounds until stopped, then go offline and return the exit status.

        A round that fails with a Redis error is tried again after a wait that grows with each failure;
        the outage is logged once as it starts and once as it ends.

        Args:
            handle_signals: In the main thread, take the stop signals while running: SIGTERM, SIGINT and
                SIGHUP stop it after the current round, and a second one exits the process at once with
                status 128 + signal, as for a worker. The previous handlers are restored on return.

        Returns:
            The exit status: 0 (a forced stop exits the process instead).
        """
        status = self.lifecycle.run(self._run, handle_signals)
        self._logger.info("%s stopped", self.lifecycle.what)
        return status

    def stop(self) -> None:
        """Stop after the current round; call it from any thread."""
        self.lifecycle.stop()

    def _run(self) -> None:
        self.starting()
        self.lifecycle.online()
        rounds(self.lifecycle, self.outage, self.round)

    def starting(self) -> None:
        """Say (one log line) what the role is about to do."""
        raise NotImplementedError

    def round(self) -> float:
        """One round of the role's work; returns the seconds to wait before the next one."""
        raise NotImplementedError
