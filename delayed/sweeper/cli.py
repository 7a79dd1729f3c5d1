"""`python -m delayed.sweeper` and `delayed-sweeper`: parse, connect, sweep."""
import argparse
import logging
from typing import List, Optional, Sequence

from ..protocol.queue import Queue
from ..protocol.sweeper_ops import DEFAULT_MAX_CRASHES
from ..runtime.command import (add_connection_options, add_dead_options, add_eviction_option, check_queue_names,
                               connect_unless_stopped, positive, run_command)
from ..runtime.lifecycle import Lifecycle
from . import Sweeper

def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m delayed.sweeper",
        description="Requeue the tasks of dead workers, Python or Go, every INTERVAL seconds, and move due "
                    "scheduled tasks into their queues twice a second.")
    add_connection_options(parser)
    parser.add_argument("--queue", action="append", dest="queues", metavar="NAME",
                        help="queue to sweep; repeat for several (default: default)")
    parser.add_argument("--interval", type=positive(float), default=60,
                        help="seconds between sweeps (default: %(default)s)")
    parser.add_argument("--max-crashes", type=int, default=DEFAULT_MAX_CRASHES,
                        help="dead-letter a task once workers died holding it more often than this; "
                             "0 never does (default: %(default)s)")
    add_dead_options(parser)
    add_eviction_option(parser)
    return parser


def _sweeper(args: argparse.Namespace) -> int:
    lifecycle = Lifecycle("sweeper")  # stop signals while connecting end the start gracefully
    with lifecycle.signals():
        conn = connect_unless_stopped(args, lifecycle, logging.getLogger("delayed.sweeper"))
        if conn is None:
            return lifecycle.exit_status
        names: List[str] = args.queues or ["default"]
        check_queue_names(conn, names)
        queues = [Queue(name, conn, dead_max=args.dead_max, dead_max_age=args.dead_max_age) for name in names]
        sweeper = Sweeper(queues, interval=args.interval,
                          max_crashes=args.max_crashes)
        lifecycle.on_stop(sweeper.stop)
        return sweeper.run(handle_signals=False)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command("delayed.sweeper", _sweeper, parser(), argv)
