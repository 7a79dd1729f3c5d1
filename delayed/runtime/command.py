"""What every command line shares: the connection options, a checked connection, one-line errors."""
import argparse
import importlib.util
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, TypeVar

import redis
from redis.exceptions import RedisClusterException
from redis.sentinel import MasterNotFoundError

from ..logger import LOG_FORMATS, log_to_stderr, say
from ..protocol.connection import (
    DEFAULT_REDIS_URL,
    URL_VARIABLE,
    RedisURLError,
    configured_url,
    connect,
    is_cluster,
    ping,
    unparsable,
)
from ..protocol.dead_letters import DEFAULT_DEAD_MAX, DEFAULT_DEAD_MAX_AGE
from ..protocol.eviction import eviction_policy
from ..protocol.redaction import redacted, scrubbed, secrets_of
from ..protocol.redis_errors import refused_credentials
from ..protocol.sentinels import sentinels_say
from ..protocol.sweeper_ops import DEFAULT_MAX_CRASHES
from ..wire.keys import check_queue_name
from ..wire.options import PUBLIC, from_text, help_of
from . import cmdline
from .exiting import exit_abandoning_threads
from .lifecycle import Lifecycle

T = TypeVar("T")


class CommandError(Exception):
    """A problem to report as one line on stderr, with exit status `status`."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def positive(kind: Callable[[str], float], zero: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number above 0, or with zero, 0 too (argparse reports anything else,
    exit status 2)."""
    def parse(text: str) -> float:
        value = kind(text)
        if not (0 < value < math.inf or zero and value == 0):
            raise argparse.ArgumentTypeError(f"must be {'0 or ' if zero else ''}a positive number, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse's "invalid float value: 'x'" names the type by it
    return parse


def add_connection_options(parser: argparse.ArgumentParser, defaults: bool = True) -> None:
    """--redis-url, the TLS files, --log-level and --log-format; defaults=False leaves unset options out
    of the namespace (for options given before a subcommand, which passes them on)."""
    def default(value: Optional[str]) -> Optional[str]:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument("--redis-url", metavar="URL", default=default(configured_url()),
                        help="redis://[user:password@]host:port/db, rediss://... for TLS, "
                             "unix:///path/redis.sock, redis+cluster://host:port[,host:port...] (rediss+cluster:// "
                             "for TLS), or redis+sentinel://host:port[,host:port...]/MASTER_NAME[/db] "
                             f"(default: ${URL_VARIABLE}, else {DEFAULT_REDIS_URL})")
    parser.add_argument("--tls-ca", metavar="FILE", default=default(None),
                        help="CA certificate to verify a rediss:// server with")
    parser.add_argument("--tls-cert", metavar="FILE", default=default(None),
                        help="client certificate, for servers that require one")
    parser.add_argument("--tls-key", metavar="FILE", default=default(None), help="the client certificate's private key")
    add_log_options(parser, defaults)


def add_log_options(parser: argparse.ArgumentParser, defaults: bool = True) -> None:
    """--log-level and --log-format, which every command takes (see add_connection_options for defaults)."""
    parser.add_argument("--log-level", default="INFO" if defaults else argparse.SUPPRESS, type=str.upper,
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="the least severe log lines written to stderr (default: INFO)")
    parser.add_argument("--log-format", default="text" if defaults else argparse.SUPPRESS, choices=LOG_FORMATS,
                        help="text lines, or json: one JSON object per line on stderr (time, level, logger, "
                             "message, and the task, queue and func where a line has them), the command's own "
                             "errors and warnings too (default: text)")


def _connection_options(args: argparse.Namespace) -> Dict[str, str]:
    options = {name: value for name, value in (("ssl_ca_certs", args.tls_ca), ("ssl_certfile", args.tls_cert),
                                               ("ssl_keyfile", args.tls_key)) if value}
    if options and not args.redis_url.startswith(("rediss://", "rediss+cluster://")):
        raise CommandError("--tls-ca, --tls-cert and --tls-key need a rediss:// URL", status=2)
    return options


def client(args: argparse.Namespace) -> redis.Redis:
    return connect(args.redis_url, **_connection_options(args))


def connect_checked(args: argparse.Namespace, stopping: Callable[[], bool] = lambda: False) -> redis.Redis:
    """A client for args.redis_url that has answered a PING, or a CommandError that says why not:
    a URL that does not parse is a usage error (exit status 2), a Redis that does not answer exit 1.

    No message holds the URL's password: the URL is shown redacted, and redis-py's own message
    is scrubbed of it (or left out for a URL that does not parse, which may quote any piece of it).
    """
    url = args.redis_url
    try:
        conn = client(args)  # a RedisCluster connects here
        once_more_if_dropped(lambda: ping(conn), stopping)
    except RedisURLError as exc:  # ours: says what is wrong, without the password
        raise CommandError(f"not a valid Redis URL: {exc}", status=2) from None
    except (ValueError, TypeError) as exc:  # redis-py's, for an option of the URL it took but cannot connect with
        raise CommandError(f"not a valid Redis URL: {unparsable(url, exc)}", status=2) from None
    except UNREACHABLE as exc:  # unreachable, refused, or refused our password
        raise _unreachable(url, exc, conn if isinstance(exc, MasterNotFoundError) else None) from None
    return conn


DROPPED_PAUSE = 0.2
"""Seconds before a start's check is sent again over a connection Redis dropped."""


def once_more_if_dropped(check: Callable[[], T], stopping: Callable[[], bool] = lambda: False) -> T:
    """check(), sent once more if Redis dropped the connection (a CLIENT KILL, a restart, a
    failover), unless stopping() says a stop was asked for: a process starting at that moment
    starts all the same. A Redis that cannot be reached fails the second time too, and the start
    ends with its one-line error."""
    try:
        return check()
    except redis.ConnectionError:
        if stopping():
            raise
        time.sleep(DROPPED_PAUSE)
        if stopping():
            raise
        return check()


UNREACHABLE = (redis.RedisError, RedisClusterException, OSError)
"""What a Redis that cannot be reached raises (a RedisCluster that reaches no node raises
RedisClusterException, which is no RedisError)."""


def _unreachable(url: str, exc: Exception, sentinels: Optional[redis.Redis] = None) -> CommandError:
    """The one-line error for a Redis at url that failed with exc, the URL's passwords masked: one that
    answered and refused the credentials says so; for a Sentinel client whose sentinels named no
    primary, what they said (redis-py's MasterNotFoundError shows their client objects instead)."""
    if refused_credentials(exc):
        return CommandError(f"Redis at {redacted(url)} refused the credentials: {scrubbed(str(exc), url)}")
    reason = sentinels_say(sentinels) if isinstance(exc, MasterNotFoundError) and sentinels else str(exc)
    return CommandError(f"cannot reach Redis at {redacted(url)}: {scrubbed(reason, url)}")


def _check_eviction(conn: redis.Redis, args: argparse.Namespace, logger: logging.Logger) -> None:
    """Refuse (exit 2) a Redis whose maxmemory-policy evicts any key, unless args.allow_eviction;
    log one WARNING for any other risk (keys with a TTL evicted, a policy that could not be read)."""
    try:
        policy = once_more_if_dropped(lambda: eviction_policy(conn))
    except UNREACHABLE as exc:  # the connection lost since its PING, twice
        raise _unreachable(args.redis_url, exc, conn) from None
    if policy.evicts_any_key and not args.allow_eviction:
        raise CommandError(f"{policy.risk} (or pass --allow-eviction to start anyway)", status=2)
    if policy.risk:
        logger.warning("%s%s", policy.risk, " (starting anyway: --allow-eviction)" if policy.evicts_any_key else "")


def add_eviction_option(parser: argparse.ArgumentParser) -> None:
    """--allow-eviction, on the worker, the sweeper and the scheduler (see _check_eviction)."""
    parser.add_argument("--allow-eviction", action="store_true",
                        help="start, with a warning, on a Redis whose maxmemory-policy is allkeys-* (refused "
                             "otherwise: it evicts queued tasks and keep-alive keys, so tasks are lost or run twice)")


def connect_unless_stopped(args: argparse.Namespace, lifecycle: Lifecycle,
                            logger: logging.Logger) -> Optional[redis.Redis]:
    """connect_checked then _check_eviction (logging to logger), unless a stop was asked for before
    or while connecting: then None."""
    if lifecycle.stopping:
        return None
    def stopping() -> bool:
        lifecycle.poll()  # a signal that came while connecting, not yet handled by the watcher
        return lifecycle.stopping

    try:
        conn = connect_checked(args, stopping)
    except CommandError:
        lifecycle.poll()
        if lifecycle.stopping:
            return None
        raise
    if lifecycle.stopping:
        conn.close()
        return None
    _check_eviction(conn, args, logger)
    return conn


def check_queue_names(conn: redis.Redis, names: Sequence[str]) -> None:
    """A CommandError (exit 2) in one line for the first name no queue can have (empty, another
    queue's key, or on a Redis Cluster without a hash tag), saying why (see
    delayed.wire.keys.check_queue_name)."""
    cluster = is_cluster(conn)
    for name in names:
        try:
            check_queue_name(name, cluster)
        except ValueError as exc:
            raise CommandError(str(exc), status=2) from None


def run_command(prog: str, main: Callable[[argparse.Namespace], int], parser: argparse.ArgumentParser,
         argv: Optional[Sequence[str]], connects: bool = True) -> int:
    """Parse argv, hide its Redis password from `ps` (a command that connects, whose parser has the
    connection options), log at its --log-level in its --log-format, run main; a CommandError is one line
    on stderr (one JSON object with --log-format json),
    a closed stdout ends it quietly (see quiet_on_closed_pipe). Threads main started and left running
    (a task's, a schedule module's) are abandoned: the process exits with main's status (see exiting)."""
    def run() -> int:
        args = parser.parse_args(argv)
        if connects:
            cmdline.hide(secrets_of(args.redis_url))  # before anything forks: children inherit the command line
        log_to_stderr(args.log_level, args.log_format)
        try:
            return main(args)
        except CommandError as exc:
            say(f"{prog}: {exc}", prog, logging.ERROR, str(exc))
            return exc.status

    started_before = set(threading.enumerate())
    status = quiet_on_closed_pipe(run)
    exit_abandoning_threads(status, logging.getLogger(prog), started_before)
    return status


@dataclass(frozen=True)
class Command:
    """A command line as one registration: the parser --help shows and the handler it runs, together,
    so that a command is added in one place (its cli.py) and `delayed NAME` runs the same one.

    Attributes:
        name: What its error lines and its logger start with: "delayed.worker".
        prog: How its usage line names it: "python -m delayed.worker".
        description: What --help says it does.
        arguments: Adds its own arguments to its parser (after the connection options, if it connects).
        run: The handler: parsed arguments in, exit status out; a CommandError is one line on stderr.
        connects: It reaches Redis: its parser takes the connection options (add_connection_options).
    """

    name: str
    prog: str
    description: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    connects: bool = True

    def parser(self) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog=self.prog, description=self.description)
        if self.connects:
            add_connection_options(parser)
        else:
            add_log_options(parser)
        self.arguments(parser)
        return parser

    def main(self, argv: Optional[Sequence[str]] = None) -> int:
        """Run the command on argv (default: the process's arguments); returns its exit status."""
        return run_command(self.name, self.run, self.parser(), argv, self.connects)


CLOSED_PIPE_STATUS = 128 + signal.SIGPIPE
"""The exit status of a command whose stdout's reader went away: a shell's for a process SIGPIPE killed."""


def quiet_on_closed_pipe(run: Callable[[], int]) -> int:
    """run(), its output flushed; if the reader of stdout went away (`delayed task ID | head -1`), the
    command ends there with CLOSED_PIPE_STATUS and no BrokenPipeError traceback, as `yes | head` does."""
    try:
        try:
            return run()
        finally:  # also as argparse's --help exits
            sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python flushes stdout once more as it exits: into nothing
        os.close(devnull)
        return CLOSED_PIPE_STATUS


def add_max_crashes_option(parser: argparse.ArgumentParser) -> None:
    """--max-crashes, on the worker and the sweeper: both sweep (see delayed.runtime.sweeping)."""
    parser.add_argument("--max-crashes", type=int, default=DEFAULT_MAX_CRASHES,
                        help="a sweep dead-letters a task once workers died holding it more often than this; "
                             "0 never does (default: %(default)s)")


def add_dead_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dead-max", type=int, default=DEFAULT_DEAD_MAX, metavar="N",
                        help="dead letters kept: writing one trims the oldest past N; 0: no bound "
                             "(default: %(default)s)")
    parser.add_argument("--dead-max-age", type=float, default=DEFAULT_DEAD_MAX_AGE, metavar="SECONDS",
                        help="writing a dead letter trims those older than this; 0: no bound (default: %(default)s)")


METRICS_HOST = "127.0.0.1"
"""The address metrics listen on unless told otherwise: loopback, as the dashboard's."""


def metrics_unavailable(port: int, host: str = METRICS_HOST) -> Optional[str]:
    """Why metrics cannot be served on host:port (prometheus-client missing, a host that is no address of
    this machine, or the port taken), else None; for a one-line error at start rather than a traceback."""
    if importlib.util.find_spec("prometheus_client") is None:
        return "metrics need prometheus-client: pip install 'delayed[metrics]'"
    try:
        [(family, kind, _, _, address), *_] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                                  flags=socket.AI_PASSIVE)
        with socket.socket(family, kind) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as prometheus_client's server does
            sock.bind(address)
    except OSError as exc:  # socket.gaierror included
        return f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}"
    return None


def add_metrics_host_option(parser: argparse.ArgumentParser, flag: str, port_flag: str) -> None:
    """The option that says which address metrics listen on (default METRICS_HOST: loopback only)."""
    parser.add_argument(flag, default=METRICS_HOST, metavar="HOST",
                        help=f"the address {port_flag} listens on (default: %(default)s, this machine only); "
                             "0.0.0.0 (or ::) for every address, so that a Prometheus on another host can scrape it")


def add_task_options(parser: argparse.ArgumentParser) -> None:
    """Every option a user gives a task, as --its-name (`delayed enqueue --max-retries 5`): their names,
    help, parsing and checks are TaskOptions' (delayed.wire.options), so the CLI refuses what the library
    refuses, in one line (exit status 2)."""
    for name in PUBLIC:
        help_text, metavar = help_of(name)
        parser.add_argument("--" + name.replace("_", "-"), dest=name, type=_option_type(name), metavar=metavar,
                            help=help_text)


def _option_type(name: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return from_text(name, text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__ = name  # argparse names the type in some messages
    return parse


def task_options_of(args: argparse.Namespace) -> Dict[str, Any]:
    """The task options add_task_options parsed (None: not given)."""
    return {name: getattr(args, name) for name in PUBLIC}
