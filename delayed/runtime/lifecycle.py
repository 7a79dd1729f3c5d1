"""One lifecycle for the long-running duties (worker, supervisor, sweeper, scheduler):

    starting → online → draining → offline

and one way to take stop signals. SIGTERM, SIGINT and SIGHUP ask for a graceful stop: finish
the current piece of work, go offline, exit 0. A second one forces the stop: exit at once with
status 128 + signal. The signal handlers only set a flag; the work (logging, calling stop
callbacks, exiting) is done outside them: by a watcher thread, so a second signal exits at once
even while the main thread is busy (running a task, or blocked on a Redis that does not answer),
or, with watch=False, by the duty's main loop in wait() and poll() (the supervisor: its loop is
never busy, and it forwards the signals to its children itself).

    lifecycle = Lifecycle("sweeper")
    with lifecycle.signals():            # main thread only; does nothing elsewhere
        lifecycle.online()
        while not lifecycle.wait(interval):   # True once a stop was asked for
            do_one_round()
    lifecycle.offline()
    return lifecycle.exit_status         # 0 after a graceful stop

API
- Lifecycle(what, supervised=False, finishing="the current task"): what names the duty in logs,
  and finishing what it completes before it stops ("" for a duty that stops at once). supervised: a child of a
  `--concurrency` supervisor: SIGINT is ignored and only the first SIGTERM/SIGHUP counts (the
  supervisor forwards a Ctrl-C once and escalates with SIGKILL itself).
- state: STARTING, ONLINE, DRAINING or OFFLINE. online() and offline() move it; a stop request
  moves it to DRAINING (from STARTING too: online() then leaves it DRAINING).
- signals(watch=True, force_exit=True): a context manager that installs the flag-only handlers
  and a wakeup pipe (signal.set_wakeup_fd), and restores the previous ones on exit. A daemon
  thread handles the signals (logs them, calls stop(), exits 128 + signal on the second); with
  watch=False, wait() and poll() in the main loop do. force_exit=False: a second signal only
  sets `forced` (the supervisor kills its children before it returns). install() and
  uninstall() are the same in two calls.
- stop(): ask for a graceful stop, from any thread (never call it from a signal handler).
- stopping: a stop was asked for (by stop() or a signal). forced: the signal number that forced
  the stop, else None. exit_status: 128 + forced after a forced stop, else 0.
- on_stop(callback): call callback() once a stop is asked for (at once if it already was).
- wait(timeout): sleep up to timeout seconds, cut short by a stop; handles the signals that
  arrived; returns stopping. Pass it as an OutageBackoff's wait so waiting for Redis honours stop too.
- poll(): handle the signals that arrived, without waiting. fileno(): a descriptor that turns
  readable when a signal or stop() arrives, for loops that select on other things too.
- after_fork(): in a forked child, drop the parent's wakeup pipe before installing its own.
- run(body, handle_signals=True): body() with signals() (if asked), offline() after; the exit
  status. A duty's run() is this around its loop.
"""
import contextlib
import logging
import os
import select
import signal
import threading
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

STARTING, ONLINE, DRAINING, OFFLINE = "starting", "online", "draining", "offline"


def _flag(signum: int, frame: Any) -> None:
    """The Python-level handler of the stop signals: it does nothing more than the flag already set.

    Python's C-level handler has written the signal number into the wakeup pipe before this runs,
    and that byte is the flag: whoever reads the pipe (wait(), poll() or the watcher) acts on it.
    """


class ForkSafeThread(threading.Thread):
    """A thread of ours that holds no lock a forked keep-alive helper needs (it never touches a Redis
    client), so a worker may still fork one while it runs (see delayed.worker.keepalive)."""

    fork_safe = True


class Lifecycle:
    """The state of one long-running duty and its stop requests; see the module docstring."""

    def __init__(self, what: str, supervised: bool = False, finishing: str = "the current task") -> None:
        self.what = what
        self.supervised = supervised
        self.finishing = finishing
        self.state = STARTING
        self.forced: Optional[int] = None
        self._signalled = False
        self._stopped = threading.Event()
        self._callbacks: List[Callable[[], Any]] = []
        self._lock = threading.RLock()
        self._pipe: Optional[Tuple[int, int]] = None
        self._force_exit = True
        self._watcher: Optional[threading.Thread] = None
        self._closing = False

    # -- state ---------------------------------------------------------------------------
    def online(self) -> None:
        with self._lock:
            if self.state == STARTING:
                self.state = ONLINE

    def offline(self) -> None:
        self.state = OFFLINE

    def run(self, body: Callable[[], Any], handle_signals: bool = True) -> int:
        """Run a duty's loop under this lifecycle: with its stop signals taken (main thread only)
        if handle_signals, offline once body returns or raises; the exit status."""
        try:
            with self.signals() if handle_signals else contextlib.nullcontext():
                body()
        finally:
            self.offline()
        return self.exit_status

    @property
    def stopping(self) -> bool:
        return self._stopped.is_set()

    @property
    def exit_status(self) -> int:
        return 0 if self.forced is None else 128 + self.forced

    def stop(self) -> None:
        """Ask for a graceful stop (from any thread, not from a signal handler)."""
        with self._lock:
            if self._stopped.is_set():
                return
            if self.state != OFFLINE:
                self.state = DRAINING
            self._stopped.set()
            callbacks = list(self._callbacks)
        self._wake()
        for callback in callbacks:
            callback()

    def on_stop(self, callback: Callable[[], Any]) -> None:
        with self._lock:
            self._callbacks.append(callback)
            already = self._stopped.is_set()
        if already:
            callback()

    # -- waiting -------------------------------------------------------------------------
    def wait(self, timeout: Optional[float]) -> bool:
        """Sleep up to timeout seconds (None: until a stop), cut short by a stop; returns stopping."""
        pipe = self._pipe
        if pipe is None or self._watcher is not None:
            self._stopped.wait(timeout)
        elif not self.stopping:
            try:
                select.select([pipe[0]], [], [], timeout)
            except (OSError, ValueError):  # the pipe was closed under us: nothing more will arrive
                self._stopped.wait(timeout)
        self.poll()
        return self.stopping

    def fileno(self) -> Optional[int]:
        """The read end of the wakeup pipe while signals() is in effect, else None."""
        return None if self._pipe is None else self._pipe[0]

    def poll(self) -> None:
        """Handle the stop signals that arrived since the last call (logs, stop(), a forced stop)."""
        with self._lock:
            while self._pipe is not None:
                try:
                    data = os.read(self._pipe[0], 512)
                except OSError:  # empty (BlockingIOError), or closed
                    return
                if not data:
                    return
                for signum in data:
                    if signum in STOP_SIGNALS:
                        self._signal(signum)

    def _signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self.supervised and signum == signal.SIGINT:
            return
        if not self._signalled:
            self._signalled = True
            logger.info("%s: %s received, stopping%s", self.what, name,
                        f" after {self.finishing}" if self.finishing else "")
            self.stop()
        elif not self.supervised and self.forced is None:
            self.forced = signum
            logger.warning("%s: second signal %s, exiting at once", self.what, name)
            if self._force_exit:
                os._exit(128 + signum)

    def _wake(self) -> None:
        pipe = self._pipe
        if pipe is not None:
            try:
                os.write(pipe[1], b"\0")
            except OSError:  # full (a wake is pending anyway) or already closed
                pass

    # -- signals -------------------------------------------------------------------------
    @contextmanager
    def signals(self, watch: bool = True, force_exit: bool = True) -> Iterator["Lifecycle"]:
        """Take SIGTERM, SIGINT and SIGHUP while in the block (main thread only; elsewhere a no-op)."""
        previous = self.install(watch, force_exit)
        try:
            yield self
        finally:
            self.uninstall(previous)

    def install(self, watch: bool = True, force_exit: bool = True) -> Optional[Dict[int, Any]]:
        """What signals() does on entry; returns what uninstall() restores (None: nothing installed)."""
        if threading.current_thread() is not threading.main_thread():
            return None
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        os.set_blocking(write_end, False)
        self._pipe = (read_end, write_end)
        self._force_exit = force_exit
        self._closing = False
        previous: Dict[int, Any] = {}
        for signum in STOP_SIGNALS:
            ignore = self.supervised and signum == signal.SIGINT
            previous[signum] = signal.signal(signum, signal.SIG_IGN if ignore else _flag)
        previous[0] = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        if watch:
            self._watcher = ForkSafeThread(target=self._watch, name=f"delayed {self.what} signals", daemon=True)
            self._watcher.start()
        return previous

    def uninstall(self, previous: Optional[Dict[int, Any]]) -> None:
        if previous is None:
            return
        previous = dict(previous)
        signal.set_wakeup_fd(previous.pop(0))
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        self.poll()  # signals that came before the handlers were restored
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            self._closing = True
            self._wake()
            watcher.join(1)
        self._close_pipe()

    def after_fork(self) -> None:
        """In a forked child: stop writing signals into the parent's pipe, and close the child's copy."""
        if self._pipe is not None:
            signal.set_wakeup_fd(-1)
            self._close_pipe()

    def _close_pipe(self) -> None:
        with self._lock:
            pipe, self._pipe = self._pipe, None
        if pipe is not None:
            for fd in pipe:
                os.close(fd)

    def _watch(self) -> None:
        pipe = self._pipe
        while pipe is not None and not self._closing:
            try:
                select.select([pipe[0]], [], [])
            except (OSError, ValueError):
                return
            self.poll()
