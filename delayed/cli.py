"""Command lines of `python -m delayed.worker`, `.sweeper` and `.scheduler`: parse, connect, run."""
import argparse
import importlib
import logging
import os
import runpy
import sys
from typing import Callable, Dict, List, Optional, Sequence

import redis

from .connection import DEFAULT_REDIS_URL, connect, redacted
from .functions import FunctionRegistry
from .lifecycle import Lifecycle
from .metrics import tasks as task_metrics
from .metrics import unavailable as metrics_unavailable
from .queue import DEFAULT_MAX_CRASHES, DEFAULT_MAX_TASK_SIZE, Queue
from .scheduler import Periodic, Scheduler
from .supervisor import Supervisor
from .sweeper import Sweeper
from .worker import DEFAULT_BATCH, Worker

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"


class CommandError(Exception):
    """A problem to report as one line on stderr, with exit status `status`."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def _positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    return parse


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--redis-url", default=os.environ.get("DELAYED_REDIS_URL", DEFAULT_REDIS_URL),
                        help="redis://[user:password@]host:port/db, rediss://... for TLS, or "
                             "unix:///path/redis.sock (default: $DELAYED_REDIS_URL, else %(default)s)")
    parser.add_argument("--tls-ca", metavar="FILE", help="CA certificate to verify a rediss:// server with")
    parser.add_argument("--tls-cert", metavar="FILE", help="client certificate, for servers that require one")
    parser.add_argument("--tls-key", metavar="FILE", help="the client certificate's private key")
    parser.add_argument("--log-level", default="INFO", type=str.upper,
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def _connection_options(args: argparse.Namespace) -> Dict[str, str]:
    options = {name: value for name, value in (("ssl_ca_certs", args.tls_ca), ("ssl_certfile", args.tls_cert),
                                               ("ssl_keyfile", args.tls_key)) if value}
    if options and not args.redis_url.startswith("rediss://"):
        raise CommandError("--tls-ca, --tls-cert and --tls-key need a rediss:// URL", status=2)
    return options


def _client(args: argparse.Namespace) -> redis.Redis:
    return connect(args.redis_url, **_connection_options(args))


def connect_checked(args: argparse.Namespace) -> redis.Redis:
    """A client for args.redis_url that has answered a PING, or a CommandError that says why not."""
    url = args.redis_url
    try:
        conn = _client(args)
        conn.ping()
    except (redis.RedisError, OSError, ValueError, TypeError) as exc:  # unreachable, refused, or a bad URL
        raise CommandError(f"cannot reach Redis at {redacted(url)}: {exc}") from None
    return conn


def _connect_unless_stopped(args: argparse.Namespace, lifecycle: Lifecycle) -> Optional[redis.Redis]:
    """connect_checked, unless a stop was asked for before or while connecting: then None."""
    if lifecycle.stopping:
        return None
    try:
        conn = connect_checked(args)
    except CommandError:
        lifecycle.poll()  # a signal that came while connecting, not yet handled by the watcher
        if lifecycle.stopping:
            return None
        raise
    if lifecycle.stopping:
        conn.close()
        return None
    return conn


def run_command(prog: str, main: Callable[[argparse.Namespace], int], parser: argparse.ArgumentParser,
         argv: Optional[Sequence[str]]) -> int:
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format=LOG_FORMAT)
    try:
        return main(args)
    except CommandError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return exc.status


def worker_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m delayed.worker",
        description="Run PyTasks from a go-delayed queue, calling only functions defined in MODULE...")
    add_connection_options(parser)
    parser.add_argument("--queue", default="default", help="queue name (default: %(default)s)")
    parser.add_argument("--concurrency", type=_positive(int), default=1,
                        help="worker processes, each with its own id (default: %(default)s)")
    parser.add_argument("--threads", type=_positive(int), default=1,
                        help="tasks each process runs at once: plain functions each in a thread, coroutine "
                             "functions on one event loop (default: %(default)s)")
    parser.add_argument("--keep-alive-timeout", type=_positive(float), default=60,
                        help="seconds a dead worker's task waits before a sweeper requeues it "
                             "(default: %(default)s); refreshed every quarter of it")
    parser.add_argument("--batch", type=_positive(int), default=DEFAULT_BATCH,
                        help="most tasks claimed per round trip, each under its own worker id; "
                             "1 claims one at a time (default: %(default)s)")
    parser.add_argument("--time-limit", type=_positive(float), metavar="SECONDS",
                        help="fail a task that runs longer (a task's own time_limit wins; default: none)")
    parser.add_argument("--max-task-size", type=_positive(int), default=DEFAULT_MAX_TASK_SIZE,
                        help="bytes; larger tasks go to the dead-letter list (default: %(default)s)")
    parser.add_argument("--metrics-port", type=_positive(int), metavar="PORT",
                        help="serve Prometheus metrics of the tasks run on http://0.0.0.0:PORT/metrics, all "
                             "processes together (needs prometheus-client; default: none)")
    parser.add_argument("modules", metavar="MODULE", nargs="+",
                        help="module whose public functions tasks may call")
    return parser


def _worker(args: argparse.Namespace) -> int:
    problem = args.metrics_port and metrics_unavailable(args.metrics_port)
    if problem:
        raise CommandError(problem, status=2)
    # The stop signals are taken from here on, before the task modules are imported and Redis is
    # reached: a stop then ends the start gracefully (exit 0), and later passes on to the duty.
    lifecycle = Lifecycle("supervisor" if args.concurrency > 1 else "worker")
    with lifecycle.signals():
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # as `python -m` does, so ./tasks.py imports
        try:
            functions = FunctionRegistry(args.modules)
        except ImportError as exc:
            raise CommandError(f"cannot import task module: {exc}", status=2) from None
        conn = _connect_unless_stopped(args, lifecycle)
        if conn is None:
            return lifecycle.exit_status
        conn.close()

        def make_worker() -> Worker:
            queue = Queue(args.queue, _client(args), keep_alive_timeout=args.keep_alive_timeout,
                          max_task_size=args.max_task_size)
            return Worker(queue, functions, keep_alive_interval=args.keep_alive_timeout / 4,
                          batch=args.batch, time_limit=args.time_limit, threads=args.threads,
                          observe=task_metrics.TaskMetrics(args.queue) if args.metrics_port else None)

        if args.concurrency > 1:
            supervisor = Supervisor(make_worker, args.concurrency, metrics_port=args.metrics_port)
            lifecycle.on_stop(supervisor.stop)
            return supervisor.run()  # takes the signals itself while it runs
        if args.metrics_port:
            task_metrics.serve(args.metrics_port)
        worker = make_worker()
        lifecycle.on_stop(worker.stop)
        return worker.run(handle_signals=False)


def worker_main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command("delayed.worker", _worker, worker_parser(), argv)


def sweeper_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m delayed.sweeper",
        description="Requeue the tasks of dead workers, Python or Go, every INTERVAL seconds.")
    add_connection_options(parser)
    parser.add_argument("--queue", action="append", dest="queues", metavar="NAME",
                        help="queue to sweep; repeat for several (default: default)")
    parser.add_argument("--interval", type=_positive(float), default=60,
                        help="seconds between sweeps (default: %(default)s)")
    parser.add_argument("--max-crashes", type=int, default=DEFAULT_MAX_CRASHES,
                        help="dead-letter a task once workers died holding it more often than this; "
                             "0 never does (default: %(default)s)")
    return parser


def _sweeper(args: argparse.Namespace) -> int:
    lifecycle = Lifecycle("sweeper")  # stop signals while connecting end the start gracefully
    with lifecycle.signals():
        conn = _connect_unless_stopped(args, lifecycle)
        if conn is None:
            return lifecycle.exit_status
        names: List[str] = args.queues or ["default"]
        sweeper = Sweeper([Queue(name, conn) for name in names], interval=args.interval,
                          max_crashes=args.max_crashes)
        lifecycle.on_stop(sweeper.stop)
        return sweeper.run(handle_signals=False)


def sweeper_main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command("delayed.sweeper", _sweeper, sweeper_parser(), argv)


def scheduler_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m delayed.scheduler",
        description="Enqueue periodic tasks; run several replicas: each tick is enqueued once.")
    add_connection_options(parser)
    parser.add_argument("schedule", metavar="MODULE_OR_FILE",
                        help="a module name or .py file defining SCHEDULE, a list of delayed.scheduler.Periodic")
    return parser


def _load_schedule(source: str) -> List[Periodic]:
    try:
        if source.endswith(".py"):
            namespace = runpy.run_path(source)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            namespace = vars(importlib.import_module(source))
    except Exception as exc:  # the schedule file is the operator's code: say what went wrong in one line
        raise CommandError(f"cannot load {source}: {type(exc).__name__}: {exc}", status=2) from None
    entries = namespace.get("SCHEDULE")
    if not isinstance(entries, (list, tuple)) or not all(isinstance(e, Periodic) for e in entries):
        raise CommandError(f"{source} must define SCHEDULE, a list of delayed.scheduler.Periodic", status=2)
    return list(entries)


def _scheduler(args: argparse.Namespace) -> int:
    lifecycle = Lifecycle("scheduler")  # stop signals while loading and connecting end the start gracefully
    with lifecycle.signals():
        entries = _load_schedule(args.schedule)
        conn = _connect_unless_stopped(args, lifecycle)
        if conn is None:
            return lifecycle.exit_status
        scheduler = Scheduler(conn, entries)
        lifecycle.on_stop(scheduler.stop)
        return scheduler.run(handle_signals=False)


def scheduler_main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command("delayed.scheduler", _scheduler, scheduler_parser(), argv)
