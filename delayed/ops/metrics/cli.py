"""Command line of `python -m delayed.metrics`: parse, connect, export the queues' metrics."""
import argparse

from ...runtime.command import Command, CommandError, add_metrics_host_option, connect_checked, metrics_unavailable
from ...runtime.lifecycle import Lifecycle
from .queues import Exporter


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, required=True, help="serve http://HOST:PORT/metrics (HOST: --host)")
    add_metrics_host_option(parser, "--host", "--port")
    parser.add_argument("--queue", action="append", dest="queues", metavar="NAME",
                        help="queue to export; repeat for several (default: every queue that has keys, "
                             "looked for every minute)")


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


COMMAND = Command("delayed.metrics", "python -m delayed.metrics",
                  "Serve Prometheus metrics of the queues (tasks by state, workers, oldest pending), "
                  "read from Redis at each scrape.", _arguments, _export)
parser = COMMAND.parser
main = COMMAND.main
