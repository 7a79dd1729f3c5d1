"""Ending a command's process although threads it did not make daemons are still running.

Python's exit, and a multiprocessing child's once its target returns, wait for every thread that is
no daemon. A task (or a schedule module) that started one, and left it running, would keep a worker
that has drained and gone offline from ever exiting; under systemd, the stop then ends in a SIGKILL.
"""
import logging
import os
import sys
import threading
from typing import AbstractSet


def exit_abandoning_threads(status: int, logger: logging.Logger,
                            started_before: AbstractSet[threading.Thread] = frozenset()) -> None:
    """End the process now with status if threads other than this one, daemons and those in
    started_before are still running, naming them in one WARNING; return when there are none. Log
    handlers and stdio are flushed first, as os._exit does not.

    Only for a command line's own process, once its work is over: a program of the user's that runs a
    Worker waits for its threads as it chooses.
    """
    current = threading.current_thread()
    left = [thread for thread in threading.enumerate()
            if thread is not current and not thread.daemon and thread.is_alive() and thread not in started_before]
    if not left:
        return
    logger.warning("abandoning %d thread%s still running (no daemon) so that the process exits with status %d: %s",
                   len(left), "" if len(left) == 1 else "s", status, ", ".join(repr(thread.name) for thread in left))
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a reader gone, or a stream closed: nothing more can be written
            pass
    os._exit(status)
