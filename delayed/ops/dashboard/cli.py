"""Command line of `python -m delayed.dashboard` (and `delayed dashboard`): parse, connect, serve with waitress."""
import argparse
import importlib.util
import ipaddress
import os
import signal

from ...runtime import cmdline
from ...runtime.command import Command, CommandError, connect_checked, positive


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: %(default)s); any but a loopback one needs --token")
    parser.add_argument("--port", type=int, default=8080, help="port to listen on (default: %(default)s)")
    parser.add_argument("--token", default=os.environ.get("DELAYED_DASHBOARD_TOKEN") or None,
                        help="every request must carry it: open the dashboard once with ?token=TOKEN (default: "
                             "$DELAYED_DASHBOARD_TOKEN, else none; the environment keeps it out of `ps`)")
    parser.add_argument("--queue", action="append", dest="queues", metavar="NAME",
                        help="queue to show; repeat for several (default: every queue that has keys)")
    parser.add_argument("--sample-every", type=positive(float), default=5.0, metavar="SECONDS",
                        help="seconds between the throughput samples (default: %(default)s)")
    parser.add_argument("--window", type=positive(float), default=600.0, metavar="SECONDS",
                        help="seconds of throughput the charts show (default: %(default)s)")


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _serve(args: argparse.Namespace) -> int:
    missing = [name for name in ("flask", "waitress") if importlib.util.find_spec(name) is None]
    if missing:
        raise CommandError(f"the dashboard needs {' and '.join(missing)}: pip install 'delayed[dashboard]'", status=2)
    if not loopback(args.host) and not args.token:
        raise CommandError(f"refusing to serve on {args.host} without --token: anyone who reaches it could requeue "
                           "and purge dead letters", status=2)
    if args.token is not None and not args.token.strip():
        raise CommandError("--token must not be empty", status=2)
    if args.token:
        cmdline.hide([args.token])  # as the Redis password: `ps` shows every user the command line
    conn = connect_checked(args)
    import waitress

    from . import create_app

    app = create_app(conn, token=args.token, queues=args.queues, sample_every=args.sample_every,
                     window=args.window)
    try:
        server = waitress.create_server(app, host=args.host, port=args.port, threads=4)
    except OSError as exc:
        raise CommandError(f"cannot serve on {args.host}:{args.port}: {exc.strerror}", status=2) from None
    print(f"delayed dashboard on http://{args.host}:{server.effective_port}/", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)  # a stop: close the listening socket, exit 0
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


COMMAND = Command("delayed.dashboard", "python -m delayed.dashboard",
                  "Serve a web dashboard of the queues: counts, throughput, workers, dead letters "
                  "(requeue, delete, purge), scheduled and periodic tasks.", _arguments, _serve)
parser = COMMAND.parser
main = COMMAND.main
