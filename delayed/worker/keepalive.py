"""A worker's keep-alive, refreshed by a small forked helper process that a busy task cannot starve.

A thread of the worker would need the worker's GIL to refresh the keys, and a task holding it
(a long C call: a regex, a big sum, an extension) longer than the keep-alive timeout would let
them lapse: a sweeper would requeue the running task (a duplicate run) and count a crash. The
helper is forked as the worker goes online, before the worker starts its own threads, and
refreshes the keys (through the Queue, on a connection of its own: redis-py pools reset in a
forked child) every interval for as long as the worker process lives: it ends when the worker
stops it, and when the worker process dies (SIGKILL included) its keys lapse as before.

If the helper cannot be forked or dies, a thread of the worker refreshes the keys instead; so it
does when the process already runs other threads as the worker starts (a worker run in a thread
of a bigger program), but for threads marked fork_safe (holding no lock the helper needs, as
delayed.runtime.lifecycle's signal watcher): a child forked then could inherit a lock held by one of
them and hang.
"""
import ctypes
import ctypes.util
import logging
import os
import select
import signal
import threading
from typing import Any, Callable, Optional

import redis

from ..runtime.backoff import Outage
from ..runtime.lifecycle import STOP_SIGNALS
from .background import Every

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
ORPHAN_CHECK = 0.1
"""Seconds between the helper's checks that its worker still lives (where prctl is missing)."""


def _die_with_parent() -> None:
    """Linux: have the kernel kill this process when the thread that forked it ends."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _helper(stop_fd: int, parent: int, interval: float, refresh: Callable[[], Any]) -> None:
    """The forked helper's whole life: refresh every interval until told to stop or orphaned."""
    for signum in STOP_SIGNALS:  # a stop signal is the worker's to handle: it still holds its tasks
        signal.signal(signum, signal.SIG_IGN)
    _die_with_parent()
    waited = 0.0
    while os.getppid() == parent:
        step = min(ORPHAN_CHECK, interval - waited)
        if select.select([stop_fd], [], [], step)[0]:
            return
        waited += step
        if waited >= interval:
            waited = 0.0
            try:
                refresh()
            except redis.RedisError:
                pass  # Redis is away: the worker says so; try again at the next interval


class KeepAlive:
    """Calls refresh() every interval seconds from a forked helper process until stop()."""

    def __init__(self, interval: float, refresh: Callable[[], Any], what: str, outage: Optional[Outage] = None) -> None:
        self._interval = interval
        self._outage = outage  # says a Redis outage the fallback thread meets (the worker's, shared)
        self._refresh = refresh
        self._what = what
        self._pid: Optional[int] = None
        self._stop_fd: Optional[int] = None
        self._fallback: Optional[Every] = None
        self._lock = threading.Lock()

    def start(self) -> None:
        others = [thread.name for thread in threading.enumerate()
                  if thread is not threading.current_thread() and not getattr(thread, "fork_safe", False)]
        if others:
            # A child forked now would inherit any lock one of them holds (one of the Redis client's, say)
            # locked for good, and could wait on it forever: keep the keys from a thread instead.
            logger.info("%s: refreshed by a thread, not a helper process, as this process already runs "
                        "other threads (%s): a task holding the GIL for longer than the keep-alive timeout "
                        "can then let the keys lapse", self._what, ", ".join(others))
            self._start_fallback()
            return
        read_fd, write_fd = os.pipe()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(read_fd)
            os.close(write_fd)
            logger.warning("%s: cannot fork a keep-alive helper (%s); a thread refreshes the keys", self._what, exc)
            self._start_fallback()
            return
        if pid == 0:
            status = 0
            try:
                os.close(write_fd)
                _helper(read_fd, parent, self._interval, self._refresh)
            except BaseException:
                status = 1
            finally:
                os._exit(status)
        os.close(read_fd)
        self._pid, self._stop_fd = pid, write_fd
        self._fallback = Every(self._interval, self._check, self._what, self._outage)  # takes over if the helper dies
        self._fallback.start()

    def stop(self) -> None:
        """Stop refreshing (the helper is gone once this returns)."""
        if self._fallback is not None:
            self._fallback.stop()
        if self._stop_fd is not None:
            try:
                os.write(self._stop_fd, b"x")
            except OSError:
                pass
            os.close(self._stop_fd)
            self._stop_fd = None
        self._reap(block=True)

    def _start_fallback(self) -> None:
        self._fallback = Every(self._interval, self._refresh, self._what, self._outage)
        self._fallback.start()

    def _check(self) -> None:
        """In the worker: refresh from here if the helper is gone."""
        if self._pid is not None and not self._reap(block=False):
            return
        if self._pid is not None:
            logger.warning("%s: the keep-alive helper process is gone; a thread refreshes the keys", self._what)
            self._pid = None
        self._refresh()

    def _reap(self, block: bool) -> bool:
        """True if the helper has exited (and is reaped)."""
        with self._lock:
            if self._pid is None:
                return True
            try:
                pid, _ = os.waitpid(self._pid, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return True
            return pid != 0
