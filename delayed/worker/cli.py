"""`python -m delayed.worker` and `delayed-worker`: parse, import the task modules, connect, run."""
import argparse
import functools
import importlib
import logging
import os
import sys
from typing import Any, Callable, List, Optional, Sequence, Tuple

from ..protocol.producer import DEFAULT_MAX_TASK_SIZE
from ..protocol.queue import Queue
from ..protocol.worker_ops import DEFAULT_KEEP_ALIVE_TIMEOUT
from ..runtime.command import (
    Command,
    CommandError,
    add_dead_options,
    add_eviction_option,
    add_max_crashes_option,
    add_metrics_host_option,
    check_queue_names,
    client,
    connect_unless_stopped,
    metrics_unavailable,
    positive,
)
from ..runtime.lifecycle import Lifecycle
from ..runtime.middleware_option import add_middleware_option, made, makers_of
from . import metrics as task_metrics
from .allowlist import Allowlist, submodule_names
from .holding import check_weights
from .loop import DEFAULT_BATCH, DEFAULT_SWEEP_INTERVAL, Worker
from .supervisor import Supervisor


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", action="append", dest="queues", metavar="NAME[=WEIGHT]",
                        help="a queue to serve; repeat for several, in priority order: the first one's tasks "
                             "always go first, the next one's only while those before it are empty; or give "
                             "each a weight (--queue high=6 --queue low=1): each claim then draws the queue it "
                             "takes from first by weight, so each gets about its weight's share and none starves "
                             "(default: default)")
    parser.add_argument("--concurrency", type=positive(int), default=1,
                        help="worker processes, each with its own id (default: %(default)s)")
    parser.add_argument("--threads", type=positive(int), default=1,
                        help="tasks each process runs at once: plain functions each in a thread, coroutine "
                             "functions on one event loop (default: %(default)s)")
    parser.add_argument("--keep-alive-timeout", type=positive(float), default=DEFAULT_KEEP_ALIVE_TIMEOUT,
                        help="seconds a dead worker's task waits before a sweep requeues it "
                             "(default: %(default)s); refreshed every quarter of it")
    parser.add_argument("--sweep-interval", type=positive(float, zero=True), default=DEFAULT_SWEEP_INTERVAL,
                        metavar="SECONDS",
                        help="sweep the queues every SECONDS: requeue the tasks of dead workers, as the sweeper "
                             "does; workers and sweepers sweep a queue at most once per interval between them; "
                             "0 never sweeps (default: %(default)g)")
    add_max_crashes_option(parser)
    parser.add_argument("--batch", type=positive(int), default=DEFAULT_BATCH,
                        help="most tasks claimed per round trip, each under its own worker id; "
                             "1 claims one at a time (default: %(default)s)")
    parser.add_argument("--time-limit", type=positive(float), metavar="SECONDS",
                        help="fail a task that runs longer (a task's own time_limit wins; default: none)")
    parser.add_argument("--max-task-size", type=positive(int), default=DEFAULT_MAX_TASK_SIZE,
                        help="bytes; larger tasks go to the dead-letter list (default: %(default)s)")
    parser.add_argument("--burst", action="store_true",
                        help="exit (status 0) once the queues are empty and nothing runs, due scheduled tasks "
                             "and dead workers' tasks (a sweep first) included; tasks scheduled for later are "
                             "left for the next worker")
    add_dead_options(parser)
    parser.add_argument("--log-tasks", action="store_true",
                        help="one INFO line per finished task on delayed.worker.tasks: id (tracked tasks; '-' "
                             "otherwise), function, outcome, milliseconds (costs throughput on tiny tasks)")
    parser.add_argument("--metrics-port", type=positive(int), metavar="PORT",
                        help="serve Prometheus metrics of the tasks run on http://HOST:PORT/metrics (HOST: "
                             "--metrics-host), all processes together (needs prometheus-client; default: none)")
    add_metrics_host_option(parser, "--metrics-host", "--metrics-port")
    add_eviction_option(parser)
    add_middleware_option(parser, "each task's call (made once in each worker process)")
    parser.add_argument("modules", metavar="MODULE", nargs="+",
                        help="module whose public functions tasks may call")


def _allowlist(names: Sequence[str]) -> Allowlist:
    """The allowlist of the task modules names, or a CommandError (exit 2) saying in one line why
    there is none: a module that fails to import, whatever it raises, or no function to allow."""
    modules = []
    for name in names:
        try:
            modules.append(importlib.import_module(name))
        except ImportError as exc:
            raise CommandError(f"cannot import task module: {exc}", status=2) from None
        except Exception as exc:  # the operator's code, failing as it imports: one line, not a traceback
            detail = " ".join(str(exc).split())  # a message over several lines still makes one line
            raise CommandError(f"cannot import task module: {name} raised {type(exc).__name__}: {detail}",
                               status=2) from None
    allowlist = Allowlist(modules)
    if not len(allowlist):
        inside = [sub for module in modules for sub in submodule_names(module)]
        instead = f" such as {', '.join(inside)}" if inside else ""
        raise CommandError(f"{' '.join(names)} {'defines' if len(names) == 1 else 'define'} no function to allow (a module allows only the public "
                           f"functions defined in it, not those it imports): pass the modules that define "
                           f"them{instead}", status=2)
    logging.getLogger("delayed.worker").debug("allowed functions: %s", ", ".join(allowlist.paths()))
    return allowlist


def _queues(given: Optional[List[str]]) -> Tuple[List[str], Optional[Tuple[int, ...]]]:
    """The queues a worker serves, in priority order, and their weights (None: strict priority). Each
    --queue is NAME or NAME=WEIGHT, every one with a weight or none; a usage error (exit 2) in one line
    for a name given twice (not silently kept once), a weight that is no whole number of 1 or more, or
    weights on some queues only."""
    given = given or ["default"]
    pairs = [_name_and_weight(text) for text in given]
    names = [name for name, _ in pairs]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise CommandError(f"--queue {', '.join(twice)} given twice: name each queue once, in priority order",
                           status=2)
    weights = [weight for _, weight in pairs if weight is not None]
    if not weights:
        return names, None
    if len(weights) < len(pairs):
        raise CommandError(f"--queue {' --queue '.join(given)}: give every queue a weight (NAME=WEIGHT), or none for "
                           "strict priority", status=2)
    try:
        return names, check_weights(weights, len(names))
    except ValueError as exc:
        raise CommandError(f"--queue: {exc}", status=2) from None


def _name_and_weight(text: str) -> Tuple[str, Optional[int]]:
    """A --queue's queue name and its weight, if it gives one (NAME=WEIGHT); CommandError (exit 2) for a
    weight that is not a whole number."""
    name, given, weight = text.rpartition("=")
    if not given:
        return text, None
    try:
        return name, int(weight)
    except ValueError:
        raise CommandError(f"--queue {text}: the weight after '=' must be a whole number of 1 or more", status=2) from None


def _worker(args: argparse.Namespace) -> int:
    queue_names, weights = _queues(args.queues)
    problem = args.metrics_port and metrics_unavailable(args.metrics_port, args.metrics_host)
    if problem:
        raise CommandError(problem, status=2)
    # The stop signals are taken from here on, before the task modules are imported and Redis is
    # reached: a stop then ends the start gracefully (exit 0), and later passes on to the duty.
    lifecycle = Lifecycle("supervisor" if args.concurrency > 1 else "worker")
    with lifecycle.signals():
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # as `python -m` does, so ./tasks.py imports
        allowlist = _allowlist(args.modules)
        middleware = makers_of(args.middleware)
        conn = connect_unless_stopped(args, lifecycle, logging.getLogger("delayed.worker"))
        if conn is None:
            return lifecycle.exit_status
        check_queue_names(conn, queue_names)
        conn.close()

        def make_worker(on_online: Optional[Callable[[], Any]] = None) -> Worker:
            conn = client(args)
            queues = [Queue(name, conn, max_task_size=args.max_task_size, dead_max=args.dead_max,
                            dead_max_age=args.dead_max_age) for name in queue_names]
            return Worker(queues, allowlist, keep_alive_timeout=args.keep_alive_timeout,
                          batch=args.batch, time_limit=args.time_limit, threads=args.threads,
                          log_tasks=args.log_tasks,
                          observe=task_metrics.TaskMetrics() if args.metrics_port else None, burst=args.burst,
                          on_online=on_online, sweep_interval=args.sweep_interval, max_crashes=args.max_crashes,
                          weights=weights, middleware=made(middleware))

        if args.concurrency > 1:
            supervisor = Supervisor(make_worker, args.concurrency, metrics_port=args.metrics_port,
                                    burst=args.burst, metrics_host=args.metrics_host)
            lifecycle.on_stop(supervisor.stop)
            return supervisor.run()  # takes the signals itself while it runs
        # served once the keep-alive helper is forked: the server's thread would keep it from forking
        serve = functools.partial(task_metrics.serve, args.metrics_port, args.metrics_host) if args.metrics_port else None
        worker = make_worker(serve)
        lifecycle.on_stop(worker.stop)
        return worker.run(handle_signals=False)


COMMAND = Command("delayed.worker", "python -m delayed.worker",
                  "Run PyTasks from a go-delayed queue, calling only functions defined in MODULE...", _arguments, _worker)
parser = COMMAND.parser
main = COMMAND.main
