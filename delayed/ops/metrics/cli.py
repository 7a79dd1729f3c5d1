"""Command line of `python -m delayed.metrics`: parse, connect, export the queues' metrics."""
import argparse
from typing import Optional, Sequence

from ...runtime.command import (CommandError, add_connection_options, add_metrics_host_option, connect_checked,
                                metrics_unavailable, run_command)
from ...runtime.lifecycle import Lifecycle
from .queues import Exporter


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m delayed.metrics",
        description="Serve Prometheus metrics of the queues (tasks by state, workers, oldest pending), "
                    "read from Redis at each scrape.")
    add_connection_options(parser)
    parser.add_argument("--port", type=int, required=True, help="serve http://HOST:PORT/metrics (HOST: --host)")
    add_metrics_host_option(parser, "--host", "--port")
    parser.add_argument("--queue", action="append", dest="queues", metavar="NAME",
                        help="queue to export; repeat for several (default: every queue that has keys, "
                             "looked for every minute)")
    return parser


def _export(args: argparse.Namespace) -> int:
    problem = metrics_unavailable(args.port, args.host)
    if problem:
        raise CommandError(problem, status=2)
    lifecycle = Lifecycle("metrics exporter", finishing="")  # stop signals while connecting end the start gracefully
    with lifecycle.signals():
        conn = connect_checked(args)
        if lifecycle.stopping:
            return lifecycle.exit_status
        exporter = Exporter(conn, args.queues, args.port, args.host)
        lifecycle.on_stop(exporter.stop)
        return exporter.run(handle_signals=False)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m delayed.metrics ARGS...`; returns the exit status."""
    return run_command("delayed.metrics", _export, parser(), argv)
