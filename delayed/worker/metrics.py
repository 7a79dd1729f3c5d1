"""Worker-side metrics (SERIES): each task's outcome and run time, counted as the worker decides them
(the Observe middleware, a public `delayed.Middleware`, tells them to the worker's observe hook;
TaskMetrics is the hook that counts).

Outcomes are the worker's (see delayed.worker.holding.Outcome): done, retried, failed, dead, held,
cancelled; function is the allowed func path, "" for dead (so a flood of junk tasks cannot grow the label set).

A single worker process serves its own registry (serve). Under --concurrency the supervisor
serves every child's, merged (Multiprocess): prometheus_client's multiprocess mode, where each
child writes its values to its own files in a temporary PROMETHEUS_MULTIPROC_DIR that the
supervisor sets before its first fork, so counts survive a child that dies or is restarted.
"""
import functools
import os
import shutil
import tempfile
from types import TracebackType
from typing import Any, Callable, Dict, Optional, Tuple, Type

from ..runtime.command import METRICS_HOST
from ..runtime.series import Series
from ..wire.hooks import Call, Middleware
from .holding import Outcome

BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
           1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
"""Seconds: from a no-op task (100 µs) to ten minutes."""
MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"

TASKS = Series("delayed_tasks_total", "counter", ("queue", "function", "outcome"),
               "Tasks settled by workers, one outcome each: done (returned), retried (raised, runs again), failed "
               "(raised or rejected its arguments; dead-lettered), dead (dead-lettered without running: malformed, "
               "go_task or py_task (the other language's task), too_large, not_allowed; function \"\"), held (its "
               "rate_limit or concurrency_limit held it back at its start: it runs later, counted again then), "
               "cancelled (its cancel was requested while the worker held it)")
DURATION = Series("delayed_task_duration_seconds", "histogram", ("queue", "function"),
                  "Run time of the tasks that ran (done, retried, failed, cancelled)")
SERIES = (TASKS, DURATION)
"""What a worker's /metrics adds to prometheus_client's own process_* and python_* metrics."""


Observer = Callable[[str, str, str, Optional[float]], None]
"""A hook told each task's outcome (an Outcome) as the worker decides it: (queue name, func path,
outcome, seconds it ran); func path "" and seconds None for a dead one, seconds None for a held one."""


class Observe(Middleware):
    """`Worker(observe=...)` as middleware: tells observer each task's outcome and how long its function
    ran (a task refused before its call: 0 s; a dead one: None)."""

    def __init__(self, observer: Observer) -> None:
        self.observer = observer

    def after_call(self, call: Call) -> None:
        outcome = call.outcome
        assert outcome is not None
        if outcome == Outcome.DEAD:
            self.observer(call.queue, "", outcome, None)
        elif outcome == Outcome.HELD:  # not run: it runs later, and is told again then
            self.observer(call.queue, call.func_path, outcome, None)
        else:
            self.observer(call.queue, call.func_path, outcome, call.seconds)


@functools.lru_cache(maxsize=None)
def _instruments() -> Tuple[Any, Any]:
    """The counter and the histogram, made once per process (in a supervised child: after its fork)."""
    from prometheus_client import Counter, Histogram

    return (Counter(TASKS.name, TASKS.help, TASKS.labels),
            Histogram(DURATION.name, DURATION.help, DURATION.labels, buckets=BUCKETS))


class TaskMetrics:
    """The Observe hook (delayed.worker) of a Worker: counts each outcome, times each run, by queue and function."""

    def __init__(self) -> None:
        self._tasks, self._durations = _instruments()
        self._counters: Dict[Tuple[str, str, str], Any] = {}  # labelled children, looked up once each
        self._histograms: Dict[Tuple[str, str], Any] = {}

    def __call__(self, queue: str, function: str, outcome: str, seconds: Optional[float]) -> None:
        counter = self._counters.get((queue, function, outcome))
        if counter is None:
            counter = self._counters[queue, function, outcome] = self._tasks.labels(queue, function, outcome)
        counter.inc()
        if seconds is not None:
            histogram = self._histograms.get((queue, function))
            if histogram is None:
                histogram = self._histograms[queue, function] = self._durations.labels(queue, function)
            histogram.observe(seconds)


def _serve(port: int, host: str, registry: Any) -> Any:
    """Serve registry on /metrics at host:port, from a daemon thread. Processes forked
    later (supervised workers and their keep-alive helpers) close their copy of the listening
    socket, so none outliving this one keeps the port. A lone worker serves only once its own
    helper is forked (Worker's on_online): a running thread keeps a worker from forking one."""
    from prometheus_client import start_http_server

    server, _ = start_http_server(port, host, registry=registry)
    os.register_at_fork(after_in_child=server.socket.close)
    return server


def serve(port: int, host: str = METRICS_HOST) -> Any:
    """Serve this process's metrics (prometheus_client's default registry) on host:port; returns the
    server (its shutdown() stops it)."""
    from prometheus_client import REGISTRY

    return _serve(port, host, REGISTRY)


class Multiprocess:
    """While open, serves on host:port the merged metrics of the worker processes forked meanwhile.

    Opening sets PROMETHEUS_MULTIPROC_DIR to a fresh temporary directory (before the first fork:
    each child then writes its values there, under its pid); closing stops serving, unsets it and
    removes the directory. exited(pid) does prometheus_client's bookkeeping for a dead child.
    """

    def __init__(self, port: int, host: str = METRICS_HOST) -> None:
        self.port = port
        self.host = host
        self.directory = ""
        self._server: Any = None

    def __enter__(self) -> "Multiprocess":
        self.directory = tempfile.mkdtemp(prefix="delayed-metrics-")
        os.environ[MULTIPROC_DIR] = self.directory
        try:
            from prometheus_client import CollectorRegistry, multiprocess, values

            if values.ValueClass is values.MutexValue:  # imported before the variable was set (a task module may)
                values.ValueClass = values.get_value_class()
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry, self.directory)
            self._server = _serve(self.port, self.host, registry)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def exited(self, pid: int) -> None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, self.directory)

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        os.environ.pop(MULTIPROC_DIR, None)
        shutil.rmtree(self.directory, ignore_errors=True)
