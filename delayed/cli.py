"""Command lines of `python -m delayed.worker`, `.sweeper` and `.scheduler`: parse, connect, run."""
import argparse
import importlib
import logging
import math
import os
import runpy
import sys
from typing import Callable, Dict, List, Optional, Sequence

import redis
from redis.exceptions import RedisClusterException
from redis.sentinel import MasterNotFoundError

from . import cmdline
from .connection import (DEFAULT_REDIS_URL, RedisURLError, connect, is_cluster, misplaced_password, redacted,
                         scrubbed, secrets_of, sentinels_say)
from .eviction import eviction_policy
from .functions import FunctionRegistry, submodule_names
from .keys import check_cluster_name
from .lifecycle import Lifecycle
from .metrics import tasks as task_metrics
from .metrics import unavailable as metrics_unavailable
from .queue import DEFAULT_DEAD_MAX, DEFAULT_DEAD_MAX_AGE, DEFAULT_MAX_CRASHES, DEFAULT_MAX_TASK_SIZE, Queue
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


def positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    """An argparse type: a finite number above 0 (argparse reports anything else, exit status 2)."""
    def parse(text: str) -> float:
        value = kind(text)
        if not 0 < value < math.inf:
            raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse's "invalid float value: 'x'" names the type by it
    return parse


def add_connection_options(parser: argparse.ArgumentParser, defaults: bool = True) -> None:
    """--redis-url, the TLS files and --log-level; defaults=False leaves unset options out of the
    namespace (for options given before a subcommand, which passes them on)."""
    def default(value: Optional[str]) -> Optional[str]:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument("--redis-url", default=default(os.environ.get("DELAYED_REDIS_URL", DEFAULT_REDIS_URL)),
                        help="redis://[user:password@]host:port/db, rediss://... for TLS, "
                             "unix:///path/redis.sock, redis+cluster://host:port[,host:port...] (rediss+cluster:// "
                             "for TLS), or redis+sentinel://host:port[,host:port...]/MASTER_NAME[/db] "
                             f"(default: $DELAYED_REDIS_URL, else {DEFAULT_REDIS_URL})")
    parser.add_argument("--tls-ca", metavar="FILE", default=default(None),
                        help="CA certificate to verify a rediss:// server with")
    parser.add_argument("--tls-cert", metavar="FILE", default=default(None),
                        help="client certificate, for servers that require one")
    parser.add_argument("--tls-key", metavar="FILE", default=default(None), help="the client certificate's private key")
    parser.add_argument("--log-level", default=default("INFO"), type=str.upper,
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def _connection_options(args: argparse.Namespace) -> Dict[str, str]:
    options = {name: value for name, value in (("ssl_ca_certs", args.tls_ca), ("ssl_certfile", args.tls_cert),
                                               ("ssl_keyfile", args.tls_key)) if value}
    if options and not args.redis_url.startswith(("rediss://", "rediss+cluster://")):
        raise CommandError("--tls-ca, --tls-cert and --tls-key need a rediss:// URL", status=2)
    return options


def _client(args: argparse.Namespace) -> redis.Redis:
    return connect(args.redis_url, **_connection_options(args))


def connect_checked(args: argparse.Namespace) -> redis.Redis:
    """A client for args.redis_url that has answered a PING, or a CommandError that says why not.

    No message holds the URL's password: the URL is shown redacted, and redis-py's own message
    is scrubbed of it (or left out for a URL that does not parse, which may quote any piece of it).
    """
    url = args.redis_url
    if misplaced_password(url):
        raise CommandError(f"the password in {redacted(url)} holds a '/': percent-encode it as %2F",
                           status=2)
    try:
        conn = _client(args)
        conn.ping()
    except RedisURLError as exc:  # ours: says what is wrong, without the password
        raise CommandError(f"cannot reach Redis at {exc}") from None
    except (ValueError, TypeError) as exc:  # a URL that does not parse
        detail = "not a valid Redis URL" if secrets_of(url) else f"not a valid Redis URL ({exc})"
        raise CommandError(f"cannot reach Redis at {redacted(url)}: {detail}") from None
    except UNREACHABLE as exc:  # unreachable, refused, or refused our password
        raise _unreachable(url, exc, conn if isinstance(exc, MasterNotFoundError) else None) from None
    return conn


UNREACHABLE = (redis.RedisError, RedisClusterException, OSError)
"""What a Redis that cannot be reached raises (a RedisCluster that reaches no node raises
RedisClusterException, which is no RedisError)."""


def _unreachable(url: str, exc: Exception, sentinels: Optional[redis.Redis] = None) -> CommandError:
    """The one-line error for a Redis at url that failed with exc, the URL's passwords masked; for a
    Sentinel client whose sentinels named no primary, what they said (redis-py's MasterNotFoundError
    shows their client objects instead)."""
    reason = sentinels_say(sentinels) if isinstance(exc, MasterNotFoundError) and sentinels else str(exc)
    return CommandError(f"cannot reach Redis at {redacted(url)}: {scrubbed(reason, url)}")


def _check_eviction(conn: redis.Redis, args: argparse.Namespace, logger: logging.Logger) -> None:
    """Refuse (exit 2) a Redis whose maxmemory-policy evicts any key, unless args.allow_eviction;
    log one WARNING for any other risk (keys with a TTL evicted, a policy that could not be read)."""
    try:
        policy = eviction_policy(conn)
    except UNREACHABLE as exc:  # the connection lost since its PING
        raise _unreachable(args.redis_url, exc, conn) from None
    if policy.evicts_any_key and not args.allow_eviction:
        raise CommandError(f"{policy.risk} (or pass --allow-eviction to start anyway)", status=2)
    if policy.risk:
        logger.warning("%s%s", policy.risk, " (starting anyway: --allow-eviction)" if policy.evicts_any_key else "")


def _add_eviction_option(parser: argparse.ArgumentParser) -> None:
    """--allow-eviction, on the worker, the sweeper and the scheduler (see _check_eviction)."""
    parser.add_argument("--allow-eviction", action="store_true",
                        help="start, with a warning, on a Redis whose maxmemory-policy is allkeys-* (refused "
                             "otherwise: it evicts queued tasks and keep-alive keys, so tasks are lost or run twice)")


def _connect_unless_stopped(args: argparse.Namespace, lifecycle: Lifecycle,
                            logger: logging.Logger) -> Optional[redis.Redis]:
    """connect_checked then _check_eviction (logging to logger), unless a stop was asked for before
    or while connecting: then None."""
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
    _check_eviction(conn, args, logger)
    return conn


def check_cluster_names(conn: redis.Redis, names: Sequence[str]) -> None:
    """On a Redis Cluster, a CommandError (exit 2) in one line for the first queue name without a
    hash tag, saying how to name it (see delayed.keys.check_cluster_name); elsewhere nothing."""
    if is_cluster(conn):
        for name in names:
            try:
                check_cluster_name(name)
            except ValueError as exc:
                raise CommandError(str(exc), status=2) from None


def run_command(prog: str, main: Callable[[argparse.Namespace], int], parser: argparse.ArgumentParser,
         argv: Optional[Sequence[str]]) -> int:
    """Parse argv, hide its Redis password from `ps`, run main; a CommandError is one line on stderr."""
    args = parser.parse_args(argv)
    cmdline.hide(secrets_of(args.redis_url))  # before anything forks: children inherit the command line
    logging.basicConfig(level=args.log_level, format=LOG_FORMAT)
    try:
        return main(args)
    except CommandError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return exc.status


def _add_dead_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dead-max", type=int, default=DEFAULT_DEAD_MAX, metavar="N",
                        help="dead letters kept: writing one trims the oldest past N; 0: no bound "
                             "(default: %(default)s)")
    parser.add_argument("--dead-max-age", type=float, default=DEFAULT_DEAD_MAX_AGE, metavar="SECONDS",
                        help="writing a dead letter trims those older than this; 0: no bound (default: %(default)s)")


def worker_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m delayed.worker",
        description="Run PyTasks from a go-delayed queue, calling only functions defined in MODULE...")
    add_connection_options(parser)
    parser.add_argument("--queue", action="append", dest="queues", metavar="NAME",
                        help="a queue to serve; repeat for several, in priority order: the first one's tasks "
                             "always go first, the next one's only while those before it are empty "
                             "(default: default)")
    parser.add_argument("--concurrency", type=positive(int), default=1,
                        help="worker processes, each with its own id (default: %(default)s)")
    parser.add_argument("--threads", type=positive(int), default=1,
                        help="tasks each process runs at once: plain functions each in a thread, coroutine "
                             "functions on one event loop (default: %(default)s)")
    parser.add_argument("--keep-alive-timeout", type=positive(float), default=60,
                        help="seconds a dead worker's task waits before a sweeper requeues it "
                             "(default: %(default)s); refreshed every quarter of it")
    parser.add_argument("--batch", type=positive(int), default=DEFAULT_BATCH,
                        help="most tasks claimed per round trip, each under its own worker id; "
                             "1 claims one at a time (default: %(default)s)")
    parser.add_argument("--time-limit", type=positive(float), metavar="SECONDS",
                        help="fail a task that runs longer (a task's own time_limit wins; default: none)")
    parser.add_argument("--max-task-size", type=positive(int), default=DEFAULT_MAX_TASK_SIZE,
                        help="bytes; larger tasks go to the dead-letter list (default: %(default)s)")
    parser.add_argument("--burst", action="store_true",
                        help="exit (status 0) once the queues are empty and nothing runs, due scheduled tasks "
                             "included; tasks scheduled for later are left for the next worker")
    _add_dead_options(parser)
    parser.add_argument("--log-tasks", action="store_true",
                        help="one INFO line per finished task on delayed.worker.tasks: id (tracked tasks; '-' "
                             "otherwise), function, outcome, milliseconds (costs throughput on tiny tasks)")
    parser.add_argument("--metrics-port", type=positive(int), metavar="PORT",
                        help="serve Prometheus metrics of the tasks run on http://0.0.0.0:PORT/metrics, all "
                             "processes together (needs prometheus-client; default: none)")
    _add_eviction_option(parser)
    parser.add_argument("modules", metavar="MODULE", nargs="+",
                        help="module whose public functions tasks may call")
    return parser


def _allowed_functions(names: Sequence[str]) -> FunctionRegistry:
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
    functions = FunctionRegistry(modules)
    if not len(functions):
        inside = [sub for module in modules for sub in submodule_names(module)]
        instead = f" such as {', '.join(inside)}" if inside else ""
        raise CommandError(f"{' '.join(names)} define no function to allow (a module allows only the public "
                           f"functions defined in it, not those it imports): pass the modules that define "
                           f"them{instead}", status=2)
    logging.getLogger("delayed.worker").debug("allowed functions: %s", ", ".join(functions.paths()))
    return functions


def _queue_names(names: Optional[List[str]]) -> List[str]:
    """The queues a worker serves, in priority order; a name given twice is refused, not silently kept once."""
    names = names or ["default"]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise CommandError(f"--queue {', '.join(twice)} given twice: name each queue once, in priority order",
                           status=2)
    return names


def _worker(args: argparse.Namespace) -> int:
    queue_names = _queue_names(args.queues)
    problem = args.metrics_port and metrics_unavailable(args.metrics_port)
    if problem:
        raise CommandError(problem, status=2)
    # The stop signals are taken from here on, before the task modules are imported and Redis is
    # reached: a stop then ends the start gracefully (exit 0), and later passes on to the duty.
    lifecycle = Lifecycle("supervisor" if args.concurrency > 1 else "worker")
    with lifecycle.signals():
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # as `python -m` does, so ./tasks.py imports
        functions = _allowed_functions(args.modules)
        conn = _connect_unless_stopped(args, lifecycle, logging.getLogger("delayed.worker"))
        if conn is None:
            return lifecycle.exit_status
        check_cluster_names(conn, queue_names)
        conn.close()

        def make_worker() -> Worker:
            conn = _client(args)
            queues = [Queue(name, conn, keep_alive_timeout=args.keep_alive_timeout, max_task_size=args.max_task_size,
                            dead_max=args.dead_max, dead_max_age=args.dead_max_age) for name in queue_names]
            return Worker(queues, functions, keep_alive_interval=args.keep_alive_timeout / 4,
                          batch=args.batch, time_limit=args.time_limit, threads=args.threads,
                          log_tasks=args.log_tasks,
                          observe=task_metrics.TaskMetrics() if args.metrics_port else None, burst=args.burst)

        if args.concurrency > 1:
            supervisor = Supervisor(make_worker, args.concurrency, metrics_port=args.metrics_port,
                                    burst=args.burst)
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
    parser.add_argument("--interval", type=positive(float), default=60,
                        help="seconds between sweeps (default: %(default)s)")
    parser.add_argument("--max-crashes", type=int, default=DEFAULT_MAX_CRASHES,
                        help="dead-letter a task once workers died holding it more often than this; "
                             "0 never does (default: %(default)s)")
    _add_dead_options(parser)
    _add_eviction_option(parser)
    return parser


def _sweeper(args: argparse.Namespace) -> int:
    lifecycle = Lifecycle("sweeper")  # stop signals while connecting end the start gracefully
    with lifecycle.signals():
        conn = _connect_unless_stopped(args, lifecycle, logging.getLogger("delayed.sweeper"))
        if conn is None:
            return lifecycle.exit_status
        names: List[str] = args.queues or ["default"]
        check_cluster_names(conn, names)
        queues = [Queue(name, conn, dead_max=args.dead_max, dead_max_age=args.dead_max_age) for name in names]
        sweeper = Sweeper(queues, interval=args.interval,
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
    _add_eviction_option(parser)
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
        conn = _connect_unless_stopped(args, lifecycle, logging.getLogger("delayed.scheduler"))
        if conn is None:
            return lifecycle.exit_status
        check_cluster_names(conn, [entry.queue for entry in entries])
        scheduler = Scheduler(conn, entries)
        lifecycle.on_stop(scheduler.stop)
        return scheduler.run(handle_signals=False)


def scheduler_main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command("delayed.scheduler", _scheduler, scheduler_parser(), argv)
