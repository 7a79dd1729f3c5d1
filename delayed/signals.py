"""Stop signals: SIGTERM, SIGINT and SIGHUP ask for a graceful stop, a second one forces it.

The handling itself lives in lifecycle.py (flag-only handlers; the work is done outside them).
These two functions keep the older call shape for code not yet using a Lifecycle directly.
"""
from typing import Any, Callable, Dict, Optional

from .lifecycle import STOP_SIGNALS, Lifecycle

__all__ = ["STOP_SIGNALS", "Handlers", "stop_gracefully_then_at_once", "restore"]


class Handlers(Dict[int, Any]):
    """What stop_gracefully_then_at_once installed, for restore()."""

    lifecycle: Optional[Lifecycle] = None


def stop_gracefully_then_at_once(stop: Callable[[], Any], what: str) -> Handlers:
    """First stop signal calls stop(); a second one ends the process at once (exit 128 + signal).

    Handled by a watcher thread (the caller's main thread may be busy running a task); the
    handlers only set a flag. Does nothing outside the main thread, where Python cannot take
    signals. Returns what to pass to restore().
    """
    lifecycle = Lifecycle(what)
    previous = lifecycle.install(watch=True)
    handlers = Handlers(previous or {})
    if previous is not None:
        handlers.lifecycle = lifecycle
        lifecycle.on_stop(stop)
    return handlers


def restore(handlers: Dict[int, Any]) -> None:
    """Put back the handlers stop_gracefully_then_at_once replaced."""
    lifecycle = getattr(handlers, "lifecycle", None)
    if lifecycle is not None:
        lifecycle.uninstall(dict(handlers))
        lifecycle.offline()
