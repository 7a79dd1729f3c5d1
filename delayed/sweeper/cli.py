"""`python -m delayed.sweeper` and `delayed-sweeper`: parse, connect, sweep."""
import argparse
import logging
from typing import Any, Callable, Dict, List, Optional

import redis

from ..protocol.discovery import queue_names
from ..protocol.queue import Queue
from ..runtime.command import (
    Command,
    add_dead_options,
    add_eviction_option,
    add_max_crashes_option,
    check_queue_names,
    connect_unless_stopped,
    positive,
)
from ..runtime.lifecycle import Lifecycle
from . import Sweeper


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", action="append", dest="queues", metavar="NAME",
                        help="queue to sweep; repeat for several (default: every queue it finds, looked for "
                             "again at each sweep)")
    parser.add_argument("--interval", type=positive(float), default=60,
                        help="seconds between sweeps (default: %(default)s)")
    add_max_crashes_option(parser)
    add_dead_options(parser)
    add_eviction_option(parser)


def _sweeper(args: argparse.Namespace) -> int:
    lifecycle = Lifecycle("sweeper")  # stop signals while connecting end the start gracefully
    with lifecycle.signals():
        conn = connect_unless_stopped(args, lifecycle, logging.getLogger("delayed.sweeper"))
        if conn is None:
            return lifecycle.exit_status
        options = {"dead_max": args.dead_max, "dead_max_age": args.dead_max_age}
        check_queue_names(conn, args.queues or [])
        queues = [Queue(name, conn, **options) for name in args.queues] if args.queues else _finder(conn, options)
        sweeper = Sweeper(queues, interval=args.interval, max_crashes=args.max_crashes)
        lifecycle.on_stop(sweeper.stop)
        return sweeper.run(handle_signals=False)


def _finder(conn: redis.Redis, options: Dict[str, Any]) -> Callable[[], List[Queue]]:
    """A function that finds every queue on conn (delayed.protocol.discovery), each a Queue with these
    options; a name found that no queue can have here (on a Redis Cluster, one without a hash tag) is
    said once, and left alone."""
    known: Dict[str, Optional[Queue]] = {}

    def find() -> List[Queue]:
        names = queue_names(conn)
        for name in names:
            if name not in known:
                try:
                    known[name] = Queue(name, conn, **options)
                except ValueError as exc:
                    known[name] = None
                    logging.getLogger("delayed.sweeper").warning("not sweeping %r: %s", name, exc)
        return [queue for queue in map(known.get, names) if queue is not None]

    return find


COMMAND = Command("delayed.sweeper", "python -m delayed.sweeper",
                  "Requeue the tasks of dead workers, Python or Go, every INTERVAL seconds, and move due "
                  "scheduled tasks into their queues twice a second. Our workers sweep the queues they serve "
                  "themselves: run a sweeper for queues only go-delayed's workers serve.", _arguments, _sweeper)
parser = COMMAND.parser
main = COMMAND.main
