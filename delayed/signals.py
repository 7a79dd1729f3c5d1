"""Stop signals: SIGTERM, SIGINT and SIGHUP ask for a graceful stop."""
import logging
import os
import signal
import threading
from typing import Any, Callable, Dict, List

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

Handlers = Dict[int, Any]


def stop_gracefully_then_at_once(stop: Callable[[], Any], what: str) -> Handlers:
    """First stop signal calls stop(); a second one ends the process at once (exit 128 + signal).

    Does nothing outside the main thread, where Python cannot take signals.
    Returns the handlers it replaced, for restore().
    """
    received: List[int] = []

    def handle(signum: int, frame: Any) -> None:
        if received:
            logger.warning("%s: second signal %s, exiting at once", what, signal.Signals(signum).name)
            os._exit(128 + signum)
        received.append(signum)
        logger.info("%s: %s received, stopping after the current task", what, signal.Signals(signum).name)
        stop()

    if threading.current_thread() is not threading.main_thread():
        return {}
    return {signum: signal.signal(signum, handle) for signum in STOP_SIGNALS}


def stop_gracefully_once(stop: Callable[[], Any], what: str) -> None:
    """For a supervised child: SIGTERM or SIGHUP calls stop() once; SIGINT and repeats are ignored.

    The supervisor forwards the terminal's Ctrl-C and escalates with SIGKILL,
    so a signal that reaches both it and us (a process-group kill) counts once.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    received: List[int] = []

    def handle(signum: int, frame: Any) -> None:
        if not received:
            received.append(signum)
            logger.info("%s: %s received, stopping after the current task", what, signal.Signals(signum).name)
            stop()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGHUP, handle)


def restore(handlers: Handlers) -> None:
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
