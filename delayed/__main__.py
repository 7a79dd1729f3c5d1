"""`python -m delayed`: look at and operate the queues (stats, dead letters, scheduled tasks,
workers) and enqueue a task by hand. Tables for people, --json for scripts."""
import argparse
import json
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import redis

from . import admin
from .cli import CommandError, add_connection_options, connect_checked, run_command
from .dead_letter import DeadLetterError
from .queue import Queue
from .task import GoTask, PyTask


def table(rows: List[Dict[str, Any]], columns: Sequence[str]) -> str:
    """Rows as a plain text table; long cells are cut at 60 characters."""
    cells = [[_cell(row.get(column)) for column in columns] for row in rows]
    widths = [max([len(column)] + [len(line[i]) for line in cells]) for i, column in enumerate(columns)]
    lines = ["  ".join(column.upper().ljust(width) for column, width in zip(columns, widths))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)) for line in cells]
    return "\n".join(line.rstrip() for line in lines) if rows else "(none)"


def _cell(value: Any) -> str:
    text = "" if value is None else str(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."


def _show(args: argparse.Namespace, rows: List[Dict[str, Any]], columns: Sequence[str]) -> None:
    print(json.dumps(rows, default=str) if args.json else table(rows, columns), flush=True)


def _names(conn: redis.Redis, args: argparse.Namespace) -> List[str]:
    return args.queue or admin.queue_names(conn)


def _stats(conn: redis.Redis, args: argparse.Namespace) -> None:
    while True:
        rows = admin.stats(conn, _names(conn, args))
        if args.watch and not args.json:
            print("\033[H\033[J" + time.strftime("%H:%M:%S"), flush=True)
        _show(args, rows, ("queue", "pending", "processing", "scheduled", "dead", "workers"))
        if not args.watch:
            return
        time.sleep(args.watch)


def _workers(conn: redis.Redis, args: argparse.Namespace) -> None:
    _show(args, admin.workers(conn, _names(conn, args)), ("queue", "worker", "expires_in", "holding"))


def _dead(conn: redis.Redis, args: argparse.Namespace) -> None:
    try:
        if args.action == "list":
            rows = [admin.describe_dead(entry)
                    for entry in admin.dead_letters(conn, args.queue, args.after, args.limit)]
            _show(args, rows, ("id", "reason", "func", "failed_at", "error"))
        elif args.action == "show":
            entry = admin.describe_dead(admin.dead_letter(conn, args.queue, args.id))
            print(json.dumps(entry, default=str, indent=2) if args.json else
                  "\n".join(f"{key}: {value}" for key, value in entry.items()))
        elif args.action == "requeue":
            if args.all == bool(args.ids):
                raise CommandError("dead requeue needs ID... or --all", status=2)
            progress = _progress(f"requeueing into {args.queue}") if args.all and sys.stderr.isatty() else None
            moved = admin.requeue_dead(conn, args.queue, None if args.all else args.ids, progress)
            if progress is not None:
                print(file=sys.stderr)
            print(json.dumps({"requeued": moved}) if args.json else f"requeued {moved} tasks into {args.queue}")
        elif args.action == "delete":
            deleted = admin.delete_dead(conn, args.queue, args.ids)
            print(json.dumps({"deleted": deleted}) if args.json else f"deleted {deleted} dead letters of {args.queue}")
        else:
            if not args.yes:
                raise CommandError("dead purge deletes every dead letter of the queue: add --yes", status=2)
            purged = admin.purge_dead(conn, args.queue)
            print(json.dumps({"purged": purged}) if args.json else f"purged {purged} dead letters of {args.queue}")
    except DeadLetterError as exc:  # an id that names no letter: said in one line, exit status 1
        raise CommandError(str(exc)) from None


def _progress(what: str) -> Callable[[int, int], None]:
    """A one-line progress bar on stderr (a terminal), redrawn in place."""
    def show(done: int, total: int) -> None:
        width = 30
        filled = width * min(done, total) // max(total, 1)
        sys.stderr.write(f"\r{what}: [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        sys.stderr.flush()

    return show


def _scheduled(conn: redis.Redis, args: argparse.Namespace) -> None:
    _show(args, admin.scheduled(conn, args.queue, args.limit), ("due", "task"))


def _argument(text: str) -> Any:
    """A command-line task argument: JSON if it parses (1, 2.5, true, null, [..], {..}), else a string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _enqueue(conn: redis.Redis, args: argparse.Namespace) -> None:
    values = [_argument(text) for text in args.args]
    if args.go:
        task: Any = GoTask(args.func, values[0] if len(values) == 1 else (values or None))
    else:
        try:
            kwargs = json.loads(args.kwargs) if args.kwargs else None
        except ValueError as exc:
            raise CommandError(f"--kwargs is not JSON: {exc}", status=2) from None
        task = PyTask(args.func, values, kwargs, args.retry)
    Queue(args.queue, conn).enqueue(task, delay=args.delay)
    print(json.dumps({"enqueued": repr(task)}) if args.json else f"enqueued {task!r} into {args.queue}")


COMMANDS = {"stats": _stats, "workers": _workers, "dead": _dead, "scheduled": _scheduled, "enqueue": _enqueue}


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    add_connection_options(common)
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    top = argparse.ArgumentParser(prog="python -m delayed", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)

    stats = commands.add_parser("stats", parents=[common], help="per queue: pending, processing, scheduled, "
                                "dead, live workers")
    stats.add_argument("--queue", action="append", help="a queue (repeatable; default: every queue found)")
    stats.add_argument("--watch", type=float, metavar="SECONDS", help="refresh every SECONDS until Ctrl-C")
    workers = commands.add_parser("workers", parents=[common], help="our live workers and what they hold")
    workers.add_argument("--queue", action="append", help="a queue (repeatable; default: every queue found)")

    dead = commands.add_parser("dead", help="dead letters: list, show, requeue, delete, purge")
    actions = dead.add_subparsers(dest="action", required=True)
    for name, help_text in (("list", "the oldest dead letters, with their ids"), ("show", "one dead letter in full"),
                            ("requeue", "move dead letters back into the queue"),
                            ("delete", "delete dead letters"), ("purge", "delete every dead letter")):
        action = actions.add_parser(name, parents=[common], help=help_text)
        action.add_argument("--queue", default="default", help="(default: %(default)s)")
        if name == "list":
            action.add_argument("--after", metavar="ID", help="start after this letter (default: the oldest)")
            action.add_argument("--limit", type=int, default=20)
        elif name == "show":
            action.add_argument("id", metavar="ID")
        elif name in ("requeue", "delete"):
            action.add_argument("ids", metavar="ID", nargs="*" if name == "requeue" else "+")
            if name == "requeue":
                action.add_argument("--all", action="store_true", help="every letter, in chunks")
        else:
            action.add_argument("--yes", action="store_true", help="really delete them")

    scheduled = commands.add_parser("scheduled", help="delayed tasks and retries waiting to be due")
    scheduled_actions = scheduled.add_subparsers(dest="action", required=True)
    listing = scheduled_actions.add_parser("list", parents=[common], help="the next tasks to become due")
    listing.add_argument("--queue", default="default", help="(default: %(default)s)")
    listing.add_argument("--limit", type=int, default=20)

    enqueue = commands.add_parser("enqueue", parents=[common], help="enqueue a task by hand")
    enqueue.add_argument("func", metavar="MODULE:FUNC", help="a Python func path, or a Go one with --go")
    enqueue.add_argument("args", metavar="ARG", nargs="*", help="arguments, as JSON when they parse, else strings")
    enqueue.add_argument("--queue", default="default", help="(default: %(default)s)")
    enqueue.add_argument("--kwargs", metavar="JSON", help='keyword arguments, e.g. \'{"b": 2}\'')
    enqueue.add_argument("--retry", type=int, default=0)
    enqueue.add_argument("--delay", type=float, metavar="SECONDS")
    enqueue.add_argument("--go", action="store_true", help="a GoTask for a go-delayed worker")
    return top


def main(argv: Optional[Sequence[str]] = None) -> int:
    def command(args: argparse.Namespace) -> int:
        try:
            COMMANDS[args.command](connect_checked(args), args)
        except KeyboardInterrupt:
            pass
        return 0

    return run_command("delayed", command, parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
