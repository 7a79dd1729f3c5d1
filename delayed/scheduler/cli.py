"""`python -m delayed.scheduler` and `delayed-scheduler`: parse, load the schedule, connect, tick."""
import argparse
import importlib
import logging
import os
import runpy
import sys
from typing import List

from ..runtime.command import Command, CommandError, add_eviction_option, check_queue_names, connect_unless_stopped
from ..runtime.lifecycle import Lifecycle
from . import Periodic, Scheduler


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("schedule", metavar="MODULE_OR_FILE",
                        help="a module name or .py file defining SCHEDULE, a list of delayed.scheduler.Periodic")
    add_eviction_option(parser)


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
        conn = connect_unless_stopped(args, lifecycle, logging.getLogger("delayed.scheduler"))
        if conn is None:
            return lifecycle.exit_status
        check_queue_names(conn, [entry.queue for entry in entries])
        scheduler = Scheduler(conn, entries)
        lifecycle.on_stop(scheduler.stop)
        return scheduler.run(handle_signals=False)


COMMAND = Command("delayed.scheduler", "python -m delayed.scheduler",
                  "Enqueue periodic tasks; run several replicas: each tick is enqueued once.", _arguments, _scheduler)
parser = COMMAND.parser
main = COMMAND.main
