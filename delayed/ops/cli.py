"""`delayed` (or `python -m delayed`): look at and operate the queues (stats, dead letters,
scheduled tasks, workers, tracked tasks), enqueue or cancel a task by hand, and run a worker, sweeper or scheduler.
Tables for people, --json for scripts."""
import argparse
import datetime
import json
import logging
import re
import sys
import time
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any, Callable, Dict, List, Optional, Sequence

import redis

from ..errors import DeadLetterError, QueueFullError, TaskNotFoundError, TaskTooLargeError
from ..logger import say
from ..protocol import inspect
from ..protocol.eviction import eviction_policy
from ..protocol.queue import Queue
from ..protocol.redis_errors import error_text
from ..runtime.backoff import OutageBackoff
from ..runtime.command import (
    Command,
    CommandError,
    add_connection_options,
    add_task_options,
    check_queue_names,
    connect_checked,
    positive,
    quiet_on_closed_pipe,
    run_command,
    task_options_of,
)
from ..runtime.middleware_option import add_middleware_option, made, makers_of
from ..scheduler import cli as scheduler_cli
from ..sweeper import cli as sweeper_cli
from ..wire import preview
from ..wire.dead_letter import REASONS, UNDECODABLE
from ..wire.task import GoTask, PyTask
from ..worker import cli as worker_cli
from . import admin, flows, limits, stalls
from .contract import cli as contract_cli
from .dashboard import cli as dashboard_cli
from .metrics import cli as metrics_cli

DEAD_REASONS = [reason.value for reason in REASONS] + [UNDECODABLE]
"""What --reason takes: the reasons a letter can have (see delayed.wire.dead_letter)."""


Handler = Callable[[redis.Redis, argparse.Namespace], None]


@dataclass(frozen=True)
class Operation:
    """A command of `delayed` that operates the queues, as one registration (see operation): its name, its
    line in --help, the arguments its parser takes, and its handler, which runs on a checked connection.
    common: its parser takes the options every command takes (_common); a command of actions (`dead list`)
    gives them to each action's parser instead."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Handler
    common: bool = True


OPERATIONS: Dict[str, Operation] = {}
"""`delayed`'s own commands, in the order --help lists them: the order they are registered in."""


def operation(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None],
              common: bool = True) -> Callable[[Handler], Handler]:
    """Register the handler below as `delayed NAME`, with the function that adds its arguments."""
    def register(run: Handler) -> Handler:
        OPERATIONS[name] = Operation(name, help, arguments, run, common)
        return run

    return register


def table(rows: List[Dict[str, Any]], columns: Sequence[str], whole: Sequence[str] = ()) -> str:
    """Rows as a plain text table; long cells are cut at 60 characters, but those of the columns in
    whole (what they show is bounded already: previews)."""
    cells = [[_cell(row.get(column), column not in whole) for column in columns] for row in rows]
    widths = [max([len(column)] + [len(line[i]) for line in cells]) for i, column in enumerate(columns)]
    lines = ["  ".join(column.upper().ljust(width) for column, width in zip(columns, widths))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)) for line in cells]
    return "\n".join(line.rstrip() for line in lines) if rows else "(none)"


def _cell(value: Any, cut: bool = True) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (dict, list)):
        value = json.dumps(value)
    text = "" if value is None else str(value).replace("\n", " ")
    return text if len(text) <= 60 or not cut else text[:57] + "..."


def _show(args: argparse.Namespace, rows: List[Dict[str, Any]], columns: Sequence[str],
          whole: Sequence[str] = ()) -> None:
    print(json.dumps(rows) if args.json else table(rows, columns, whole), flush=True)


def _names(conn: redis.Redis, args: argparse.Namespace) -> List[str]:
    return args.queue or admin.queue_names(conn)


STATS_COLUMNS = ("queue", "pending", "processing", "scheduled", "dead", "workers", "paused", "latency")
LIMIT_COLUMNS = ("limit_key", "rate_limit", "started", "scheduled", "next_due_in", "concurrency_limit", "running",
                 "waiting")


def _show_stats(conn: redis.Redis, args: argparse.Namespace, rows: List[Dict[str, Any]],
                columns: Sequence[str]) -> None:
    """Stats rows; in a table, an estimated latency (see admin.LATENCY_BASES) starts with "~", an unknown
    one, while tasks wait, is "?". A GoTask no Go worker took within --go-wait seconds is flagged:
    "go_untaken" (seconds) in JSON, a warning on stderr. So is a queue holding dead workers' tasks that
    nothing sweeps (admin.unswept): "unswept_lapsed" (the tasks; 0 when none wait for a sweep) in JSON, a
    warning on stderr; and a workflow stalled behind a step that a worker which does not track tasks took
    (stalls.scan): "workflows_stalled" (its steps) and "workflows_checked" (how far the bounded look went)
    in JSON, a warning on stderr (and a note when the look stopped short). A queue with limits per key
    (limits.read) has them in "limits" (every key read, those holding back the most first) and
    "limits_complete" in JSON; in a table, the first --limit-keys of them below the queues'."""
    names = [row["queue"] for row in rows]
    untaken = {row["queue"]: row for row in admin.untaken_go_tasks(conn, names, args.go_wait)}
    unswept = {row["queue"]: row for row in admin.unswept(conn, names)}
    stalled = stalls.scan(conn, names)
    limited = limits.read(conn, rows)
    if args.json:
        _show(args, [{**row, "go_untaken": untaken[row["queue"]]["waited"] if row["queue"] in untaken else None,
                      "unswept_lapsed": unswept[row["queue"]]["lapsed"] if row["queue"] in unswept else 0,
                      "workflows_stalled": stalled.stalled[row["queue"]],
                      "workflows_checked": stalled.checked(row["queue"]),
                      "limits": limited[row["queue"]].keys if row["queue"] in limited else [],
                      "limits_complete": limited[row["queue"]].complete if row["queue"] in limited else True}
                     for row in rows], columns)
        return
    _show(args, [{**row, "latency": _latency(row)} for row in rows], columns)
    for found in limited.values():
        print(f"\nlimits of {found.queue}: {limits.summary(found)}", flush=True)
        print(table(limits.shown(found, args.limit_keys), LIMIT_COLUMNS), flush=True)
        if limits.unshown(found, args.limit_keys):
            print(f"{limits.unshown(found, args.limit_keys)}: --json lists every key read", flush=True)
    for flagged in untaken.values():
        _warn(f"queue {flagged['queue']!r}: GoTask {flagged['func']} has waited {flagged['waited']:.0f} s at its "
              "head, untaken: is a go-delayed worker running on it, with that handler registered?")
    for flagged in unswept.values():
        _warn(admin.unswept_warning(flagged))
    for queue, steps in stalled.stalled.items():
        for step in steps:
            _warn(stalls.warning(queue, step))
    if stalls.bounds(stalled):
        note = stalls.bounds(stalled)
        say(f"delayed: note: {note}", "delayed", logging.INFO, note)


def _warn(warning: str) -> None:
    """One warning of `delayed` on stderr: "delayed: warning: ...", or its JSON object (--log-format json)."""
    say(f"delayed: warning: {warning}", "delayed", logging.WARNING, warning)


def _latency(row: Dict[str, Any]) -> str:
    if row["latency"] is None:
        return "?"
    return f"{'' if row['latency_measured'] else '~'}{row['latency']}s"


def _stats_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", action="append", help="a queue (repeatable; default: every queue found)")
    parser.add_argument("--watch", type=positive(float), metavar="SECONDS",
                        help="refresh every SECONDS until Ctrl-C, with rates (tasks/s in, out, net change, "
                        "dead letters), riding out Redis outages")
    parser.add_argument("--go-wait", type=positive(float), default=300, metavar="SECONDS",
                        help="flag a GoTask that has stood this long at the head of its queue, untaken by any "
                             "go-delayed worker, as our sweeper saw it (default: %(default)s)")
    parser.add_argument("--limit-keys", type=positive(int), default=10, metavar="N",
                        help="per queue with limits per key, the N keys a table shows, those holding back the most "
                             "tasks first (default: %(default)s; --json has every key read)")


@operation("stats", "per queue: pending, processing, scheduled, dead, live workers", _stats_arguments)
def _stats(conn: redis.Redis, args: argparse.Namespace) -> None:
    policy = eviction_policy(conn)
    if policy.evicts:  # said, not refused: stats only reads
        _warn(str(policy.risk))
    if not args.watch:
        _show_stats(conn, args, admin.stats(conn, _names(conn, args)), STATS_COLUMNS)
        return
    outage = OutageBackoff(logging.getLogger("delayed.stats"), "stats --watch", initial=args.watch,
                     maximum=max(args.watch, 10))
    previous: List[Dict[str, Any]] = []
    then = time.monotonic()
    while True:
        try:
            rows = admin.stats(conn, _names(conn, args))
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            outage.failed(exc)  # says so once per outage, then waits
            previous = []  # counts from before the outage make no rate (Redis may have restarted empty)
            continue
        outage.succeeded()
        now = time.monotonic()
        rows, previous, then = admin.with_rates(rows, previous, now - then), rows, now
        if not args.json:
            print("\033[H\033[J" + time.strftime("%H:%M:%S"), flush=True)
        _show_stats(conn, args, rows, STATS_COLUMNS + ("in_per_s", "out_per_s", "net_per_s", "dead_per_s"))
        time.sleep(args.watch)


def _workers_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", action="append", help="a queue (repeatable; default: every queue found)")


@operation("workers", "live workers (ours with their host and pid), go-delayed's that hold a task too, and how many "
           "tasks each holds", _workers_arguments)
def _workers(conn: redis.Redis, args: argparse.Namespace) -> None:
    _show(args, admin.workers(conn, _names(conn, args)), ("queue", "worker", "host", "pid", "expires_in", "holding", "go"))


LETTERS_QUEUE = ("the queue whose dead letters (default: the one holding the letters, found among every queue's: "
                 "as `delayed task` finds a task's)")


def _dead_arguments(parser: argparse.ArgumentParser) -> None:
    """dead's actions, each with the common options."""
    common = _common(defaults=True)
    actions = parser.add_subparsers(dest="action", required=True)
    for name, help_text in (("list", "the oldest dead letters of every queue, with their ids and queues"),
                            ("show", "one dead letter in full"), ("requeue", "move dead letters back into their queue"),
                            ("delete", "delete dead letters"), ("purge", "delete every dead letter of a queue")):
        action = actions.add_parser(name, parents=[common], help=help_text)
        if name == "list":
            action.add_argument("--queue", action="append",
                                help="a queue (repeatable; default: every queue found, their letters merged oldest "
                                     "first)")
            action.add_argument("--after", metavar="ID", help="start after this letter (default: the oldest)")
            action.add_argument("--limit", type=positive(int), default=20, metavar="N",
                                help="letters shown (more when letters of several queues share the last id); if "
                                     "more remain, stderr says how to page on (default: %(default)s)")
        elif name == "show":
            action.add_argument("--queue", help=LETTERS_QUEUE)
            action.add_argument("id", metavar="ID", help="the letter's id, as dead list shows it")
            action.add_argument("--raw", action="store_true", help="write the task's bytes, whole, to stdout (without "
                                f"it, a preview: the task's first {admin.PREVIEW_BYTES // 1024} KiB, values cut short)")
        elif name in ("requeue", "delete"):
            action.add_argument("--queue", help=LETTERS_QUEUE + ("; needed with --all" if name == "requeue" else ""))
            action.add_argument("ids", metavar="ID", nargs="*" if name == "requeue" else "+",
                                help="a letter's id, as dead list shows it (repeatable)")
            if name == "requeue":
                action.add_argument("--all", action="store_true", help="every letter of the queue (those written "
                                    "meanwhile stay), or every one --reason and --func name, in chunks")
        else:
            action.add_argument("--queue", required=True, help="the queue whose dead letters to delete")
            action.add_argument("--yes", action="store_true", help="really delete them (without it, a purge with "
                                "--reason or --func says how many letters it would delete)")
        if name in ("requeue", "purge"):
            action.add_argument("--reason", choices=DEAD_REASONS, default="",
                                help="only the letters with this reason (with --all)" if name == "requeue" else
                                "only the letters with this reason, in chunks (those written meanwhile stay)")
            action.add_argument("--func", metavar="MODULE:FUNC", default="", help="only the letters of this function"
                                + (" (with --all)" if name == "requeue" else ", in chunks"))


@operation("dead", "dead letters: list, show, requeue, delete, purge", _dead_arguments, common=False)
def _dead(conn: redis.Redis, args: argparse.Namespace) -> None:
    try:
        if args.action == "list":
            letters, more = admin.dead_letters_of(conn, _names(conn, args), args.after, args.limit)
            _show(args, [admin.describe_dead(entry) for entry in letters],
                  ("id", "queue", "reason", "func", "failed_at", "error"))
            if more:  # on stderr: stdout stays the table, or JSON
                say(f"more: --after {letters[-1]['id']}", "delayed", logging.INFO, f"more: --after {letters[-1]['id']}")
            return
        if args.action == "requeue" and args.all == bool(args.ids):
            raise CommandError("dead requeue needs ID... or --all", status=2)
        if args.action == "requeue" and (args.reason or args.func) and not args.all:
            raise CommandError("dead requeue takes --reason and --func with --all, not with IDs", status=2)
        if args.queue is None:
            args.queue = _letters_queue(conn, args)
        if args.action == "show" and args.raw:
            _raw_task(admin.dead_letter(conn, args.queue, args.id, whole=True))
        elif args.action == "show":
            entry = admin.describe_dead(admin.dead_letter(conn, args.queue, args.id))
            print(json.dumps(entry, indent=2) if args.json else
                  "\n".join(f"{key}: {json.dumps(value) if isinstance(value, (dict, list)) else value}"
                            for key, value in entry.items()))
        elif args.action == "requeue":
            shown = args.all and sys.stderr.isatty() and args.log_format == "text"  # a bar, not lines
            progress = _progress(f"requeueing into {args.queue}") if shown else None
            moved = admin.requeue_dead(conn, args.queue, None if args.all else args.ids, progress, args.reason, args.func)
            if progress is not None:
                print(file=sys.stderr)
            print(json.dumps({"requeued": moved}) if args.json else
                  f"requeued {_counted(moved, 'task')} into {args.queue}{admin.matching(args.reason, args.func)}")
        elif args.action == "delete":
            deleted = admin.delete_dead(conn, args.queue, args.ids)
            print(json.dumps({"deleted": deleted}) if args.json else f"deleted {_counted(deleted, 'dead letter')} of {args.queue}")
        else:
            if not args.yes and not (args.reason or args.func):
                raise CommandError("dead purge deletes every dead letter of the queue: add --yes", status=2)
            if not args.yes:
                matching = admin.count_dead(conn, args.queue, args.reason, args.func)[0]
                raise CommandError(f"dead purge deletes the {_counted(matching, 'dead letter')} of {args.queue}"
                                   f"{admin.matching(args.reason, args.func)}: add --yes", status=2)
            purged = admin.purge_dead(conn, args.queue, args.reason, args.func)
            print(json.dumps({"purged": purged}) if args.json else
                  f"purged {_counted(purged, 'dead letter')} of {args.queue}{admin.matching(args.reason, args.func)}")
    except DeadLetterError as exc:  # an id that names no letter: said in one line, exit status 1
        raise CommandError(str(exc)) from None


def _letters_queue(conn: redis.Redis, args: argparse.Namespace) -> str:
    """The queue whose dead letters hold the letters args names (`dead show ID`, `requeue ID...`,
    `delete ID...` without --queue): each found as `delayed task` finds a task's queue. requeue --all,
    a letter on several queues, or letters of several queues need --queue (exit 2; purge requires it
    outright); a letter on none: exit 1."""
    if args.action == "requeue" and args.all:
        raise CommandError("dead requeue --all moves every dead letter of one queue: name it with --queue", status=2)
    ids = [args.id] if args.action == "show" else args.ids
    names = admin.queue_names(conn)
    found = {letter_id: admin.letter_queues(conn, names, letter_id) for letter_id in ids}
    missing = [letter_id for letter_id, queues in found.items() if not queues]
    if missing:
        raise CommandError(f"no dead letter {', '.join(missing)} on any queue (nothing was changed)")
    for letter_id, queues in found.items():
        if len(queues) > 1:
            raise CommandError(f"dead letter {letter_id} is on several queues ({', '.join(queues)}): name one with "
                               "--queue", status=2)
    queues = sorted({queues[0] for queues in found.values()})
    if len(queues) > 1:
        raise CommandError(f"these letters are on several queues ({', '.join(queues)}): {args.action} each "
                           "queue's with --queue", status=2)
    return queues[0]


def _counted(count: int, noun: str) -> str:
    """'1 task', '2 tasks', '0 tasks'."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _raw_task(entry: Dict[str, Any]) -> None:
    """Write a letter's task, its raw bytes, to stdout: the whole blob, however large (`dead show --raw`)."""
    if entry["task"] is None:
        raise CommandError(f"dead letter {entry['id']} holds no task")
    if sys.stdout.isatty():
        raise CommandError("--raw writes the task's bytes: redirect them to a file (> task.msgpack)", status=2)
    sys.stdout.buffer.write(entry["task"])
    sys.stdout.buffer.flush()


def _progress(what: str) -> Callable[[int, int], None]:
    """A one-line progress bar on stderr (a terminal), redrawn in place."""
    def show(done: int, total: int) -> None:
        width = 30
        filled = width * min(done, total) // max(total, 1)
        sys.stderr.write(f"\r{what}: [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        sys.stderr.flush()

    return show


def _scheduled_arguments(parser: argparse.ArgumentParser) -> None:
    """scheduled's one action, list, with the common options."""
    scheduled_actions = parser.add_subparsers(dest="action", required=True)
    listing = scheduled_actions.add_parser("list", parents=[_common(defaults=True)], help="the next tasks to become due")
    listing.add_argument("--queue", default="default", help="the queue whose scheduled tasks (default: %(default)s)")
    listing.add_argument("--limit", type=positive(int), default=20, metavar="N",
                         help="tasks shown, the next due first (default: %(default)s)")


@operation("scheduled", "delayed tasks and retries waiting to be due", _scheduled_arguments, common=False)
def _scheduled(conn: redis.Redis, args: argparse.Namespace) -> None:
    """The next scheduled tasks: JSON rows as admin.scheduled gives them; a table with each task's
    kind, attempt ("2 of 4") and its func and arguments in columns of their own, whole (previews)."""
    rows = admin.scheduled(conn, args.queue, args.limit)
    if args.json:
        _show(args, rows, ())
        return
    _show(args, [{"due": row["due"], "kind": row["kind"], **_call(row["task"]),
                  "attempt": None if row["attempt"] is None else f"{row['attempt']} of {row['attempts']}"}
                 for row in rows], ("due", "kind", "attempt", "func", "args"), whole=("func", "args"))


def _call(task: Dict[str, Any]) -> Dict[str, Any]:
    """A task preview (admin.describe_task) as a table's func and args cells: a PyTask's args and, if any,
    its kwargs after "**"; a GoTask's payload; "…" for what a truncated preview left out."""
    if "undecodable" in task:
        return {"func": f"(undecodable, {task['undecodable']} bytes)", "args": ""}
    field = "payload" if task.get("go") else "args"
    args = json.dumps(task[field]) if field in task else "…"
    kwargs = task.get("kwargs")
    return {"func": task["func"] + (" (Go)" if task.get("go") else ""),
            "args": args + (f" **{json.dumps(kwargs)}" if kwargs else "")}


def _argument(text: str) -> Any:
    """A command-line task argument: JSON if it parses (1, 2.5, true, null, [..], {..}), else a string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


_PY_FUNC_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def _enqueue_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("func", metavar="MODULE:FUNC", help="a Python func path, or a Go one with --go")
    parser.add_argument("args", metavar="ARG", nargs="*", help="arguments, as JSON when they parse, else strings")
    parser.add_argument("--queue", default="default", help="the queue to enqueue into (default: %(default)s)")
    parser.add_argument("--kwargs", metavar="JSON", help='keyword arguments, e.g. \'{"b": 2}\'')
    add_task_options(parser)
    parser.add_argument("--go", action="store_true", help="a GoTask, for a Go worker (ours or go-delayed's)")
    add_middleware_option(parser, "the enqueue")


@operation("enqueue", "enqueue a task by hand", _enqueue_arguments)
def _enqueue(conn: redis.Redis, args: argparse.Namespace) -> None:
    values = [_argument(text) for text in args.args]
    options = {name: value for name, value in task_options_of(args).items() if value is not None}
    middleware = made(makers_of(args.middleware))
    try:
        if args.go:
            if not args.func.strip():
                raise CommandError("a GoTask needs a Go func path, e.g. main.Add", status=2)
            task: Any = GoTask(args.func, values[0] if len(values) == 1 else (values or None), **options)
        else:
            if not _PY_FUNC_PATH.fullmatch(args.func):
                raise CommandError(f"{args.func!r} is not MODULE:FUNC, e.g. tasks:add (add --go for a Go func)",
                                   status=2)
            task = PyTask(args.func, values, _kwargs(args.kwargs), **options)
        handle = Queue(args.queue, conn, middleware=middleware).enqueue(task)
    except (TaskTooLargeError, TypeError, ValueError) as exc:  # too large, or options the task cannot take
        raise CommandError(str(exc), status=2) from None
    except QueueFullError as exc:
        raise CommandError(str(exc)) from None
    described = admin.describe_task(task.serialize())
    task_id = None if handle is None else handle.id
    due = None if args.at is None else args.at.isoformat()
    if args.json:
        print(json.dumps({"enqueued": described, "queue": args.queue, "id": task_id, "delay": args.delay, "at": due}))
        return
    print(f"enqueued {json.dumps(described)} into {args.queue}" +
          ("" if args.delay is None else f", due in {args.delay:g} s") + ("" if due is None else f", due at {due}") +
          ("" if task_id is None else f"; tracked as task {task_id} (delayed task {task_id})"))


def _kwargs(text: Optional[str]) -> Optional[Dict[str, Any]]:
    """--kwargs: a JSON object, or None."""
    try:
        kwargs = json.loads(text) if text else None
    except ValueError as exc:
        raise CommandError(f"--kwargs is not JSON: {exc}", status=2) from None
    if kwargs is not None and not isinstance(kwargs, dict):
        raise CommandError(f"--kwargs must be a JSON object, got {text}", status=2)
    return kwargs


FOUND_QUEUE = ("the queue that tracks it (default: the one holding a record of it, or the workflow, found with one "
               "SCAN)")


def _tracked_task_arguments(parser: argparse.ArgumentParser) -> None:
    """A tracked task's id, or a workflow's, and its queue (task, cancel)."""
    parser.add_argument("id", metavar="ID", help="the task's id, or a workflow's (its handle's .id)")
    parser.add_argument("--queue", help=FOUND_QUEUE)


def _task_arguments(parser: argparse.ArgumentParser) -> None:
    _tracked_task_arguments(parser)
    parser.add_argument("--all-steps", action="store_true",
                        help=f"list every step of a workflow (without it, one of more than {flows.LISTED} steps lists "
                             f"its first {flows.FIRST}, its final ones, and those that failed, stopped it or stalled)")


@dataclass(frozen=True)
class Tracked:
    """What an ID names: a tracked task's record or a workflow (kind "task" or "workflow"), on a queue."""

    kind: str
    queue: Queue


def _tracked(conn: redis.Redis, args: argparse.Namespace) -> Tracked:
    """What args.id names on --queue (a task's record if it has one, else a workflow), else the one record
    or workflow of that id a SCAN finds; CommandError for none, or several."""
    if args.queue is not None:
        queue = Queue(args.queue, conn)
        for kind, read in (("task", queue.task_info), ("workflow", lambda flow_id: queue.workflow(flow_id).info())):
            try:
                read(args.id)
                return Tracked(kind, queue)
            except TaskNotFoundError:
                pass
        raise CommandError(f"no record of task {args.id} in {args.queue}: never tracked (enqueued without "
                           "result_ttl), or it expired result_ttl seconds after it ended; nor a workflow of that id")
    found = inspect.id_queues(conn, args.id)
    named = [Tracked("task", Queue(name, conn)) for name in found.tasks]
    named += [Tracked("workflow", Queue(name, conn)) for name in found.workflows]
    if not named:
        raise CommandError(f"no record of task {args.id} on any queue: never tracked (enqueued without "
                           "result_ttl), or it expired result_ttl seconds after it ended; nor a workflow of that id")
    if len(named) > 1:
        where = ", ".join(f"{one.kind} in {one.queue.name}" for one in named)
        raise CommandError(f"{args.id} names several ({where}): name the queue with --queue", status=2)
    return named[0]


@operation("task", "a tracked task's status, result or error, and its workflow's steps; or a workflow's",
           _task_arguments)
def _task(conn: redis.Redis, args: argparse.Namespace) -> None:
    tracked = _tracked(conn, args)
    try:
        if tracked.kind == "workflow":
            whole = flows.view(conn, tracked.queue.name, args.id, args.all_steps)
            if args.json:
                print(json.dumps({"workflow": whole.as_dict()}, indent=2))
            else:
                _print_workflow(whole)
            return
        info = tracked.queue.task_info(args.id).as_dict()
    except TaskNotFoundError as exc:
        raise CommandError(str(exc)) from None
    workflow = flows.workflow_of(conn, tracked.queue.name, args.id)
    try:
        shown = None if workflow is None else flows.view(conn, *workflow, args.all_steps, current=args.id)
    except TaskNotFoundError:  # its workflow's hash expired first (or was deleted): the task alone
        shown = None
    info["result"] = preview.value(info["result"])  # whatever the task returned, shown bounded
    if args.json:
        print(json.dumps({**info, **({} if shown is None else {"workflow": shown.as_dict()})}, indent=2))
        return
    for key, value in info.items():
        if value is None or key == "queue":
            continue
        if key in ("enqueued_at", "due", "started_at", "finished_at", "cancel_requested_at"):
            value = _local_time(value)
        elif key == "seconds":
            value = f"{value:.6f}"
        elif key == "result":
            value = json.dumps(value)
        elif key == "expires_in":
            value = f"{value} s"
        print(f"{key}: {value}")
    if shown is not None:
        print(f"\nstep {shown.current + 1 if shown.current is not None else '?'} of workflow {shown.info.id}:")
        _print_workflow(shown)


def _print_workflow(shown: flows.WorkflowView) -> None:
    """A workflow for people: its fields, its steps counted per status, the one that stopped it, and those
    listed in a table; a stalled step also warns on stderr."""
    row = shown.as_dict()
    counts = ", ".join(f"{status} {count}" for status, count in row["counts"].items())
    lines = [f"workflow: {row['id']} of {row['queue']}", f"status: {row['status']}",
             f"steps: {row['total']}, {row['left']} left: {counts}" +
             ("" if row["read"] == row["total"] else f" (of the first {row['read']} read)")]
    for key in ("created_at", "finished_at", "expires_in"):
        if row[key] is not None:
            lines.append(f"{key}: {f'{row[key]} s' if key == 'expires_in' else _local_time(row[key])}")
    stopped = row["stopped_by"]
    if stopped is not None:
        lines.append(f"stopped_by: step {stopped['step']}, {stopped['id']}"
                     f"{'' if stopped.get('func') is None else ' (' + stopped['func'] + ')'}: {row['error']}")
    steps = [{**step, "after": flows.after_text(step["after"]), "note": flows.note(step)} for step in row["steps"]]
    lines.append(table(steps, ("step", "id", "queue", "func", "status", "after", "note")))
    if not row["listed_all"]:
        lines.append(f"({len(steps)} of {row['total']} steps listed: the first, the final ones, and those that failed, "
                     "stopped it or stalled; --all-steps lists every one)")
    look = row["stall_look"]
    if look["unchecked"] or (look["looked"] and look["looked"] < row["total"]):
        lines.append(f"(looked for stalled steps among the first {look['looked']}; {look['unchecked']} in a queue "
                     f"longer than {stalls.DEPTH} tasks could not be told)")
    for _, warning in shown.warnings():
        _warn(warning)
    print("\n".join(lines), flush=True)


def _local_time(timestamp: float) -> str:
    """A unix time as local ISO 8601; one no calendar holds as it is."""
    try:
        return datetime.datetime.fromtimestamp(timestamp).astimezone().isoformat(timespec="milliseconds")
    except (OverflowError, ValueError, OSError):
        return str(timestamp)


@operation("cancel", "cancel a tracked task: one that waits is removed, one that runs is stopped by its worker and "
           "ends cancelled; or every step of a workflow; prints what happened in a line", _tracked_task_arguments)
def _cancel(conn: redis.Redis, args: argparse.Namespace) -> None:
    tracked = _tracked(conn, args)
    try:
        outcome = (tracked.queue.workflow(args.id) if tracked.kind == "workflow" else tracked.queue.task(args.id)).cancel()
    except TaskNotFoundError as exc:
        raise CommandError(str(exc)) from None
    if args.json:
        print(json.dumps({"cancelled": outcome.cancelled, "requested": outcome.requested, "worker": outcome.worker,
                          "status": outcome.status, "reason": outcome.reason}))
    elif outcome:
        print(outcome.reason)
    if not outcome:  # ended, or lost: exit status 1
        raise CommandError(outcome.reason)


def _queue_names_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", metavar="NAME", nargs="+", help="a queue")


@operation("pause", "our workers take no new task from these queues (go-delayed's do)", _queue_names_arguments)
def _pause(conn: redis.Redis, args: argparse.Namespace) -> None:
    _set_paused(conn, args, True)


@operation("resume", "resume paused queues", _queue_names_arguments)
def _resume(conn: redis.Redis, args: argparse.Namespace) -> None:
    _set_paused(conn, args, False)


def _set_paused(conn: redis.Redis, args: argparse.Namespace, pausing: bool) -> None:
    """pause/resume: each named queue, saying what changed (go-delayed's workers do not pause)."""
    known = admin.queue_names(conn)
    rows = []
    for name in args.names:
        changed = admin.set_paused(conn, name, pausing)
        if name not in known and (pausing or not changed):  # a typo? (a queue resumed was one)
            _warn(f"no queue named {name!r} has keys now (queues found: {', '.join(known) or 'none'}); "
                  f"{'paused' if pausing else 'resumed'} all the same")
        rows.append({"queue": name, "paused": pausing, "changed": changed})
        if not args.json:
            print(f"{'paused' if pausing else 'resumed'} {name}" + ("" if changed else
                  f" (it was {'paused' if pausing else 'not paused'} already)") +
                  (": our workers take no new task from it; go-delayed's workers do not know about pausing"
                   if pausing and changed else ""))
    if args.json:
        print(json.dumps(rows))


def _named_queues(args: argparse.Namespace) -> List[str]:
    """The queues a command names: its --queue (once, or repeated) and pause's or resume's NAMEs."""
    named = getattr(args, "queue", None)
    return [*([named] if isinstance(named, str) else named or []), *getattr(args, "names", [])]


PROGRAMS: Dict[str, Command] = {
    "worker": worker_cli.COMMAND, "sweeper": sweeper_cli.COMMAND, "scheduler": scheduler_cli.COMMAND,
    "metrics": metrics_cli.COMMAND, "dashboard": dashboard_cli.COMMAND, "contract": contract_cli.COMMAND}
"""The programs `delayed NAME` runs, each with the arguments given it (those before NAME too), as
`python -m delayed.NAME` would."""


def _common(defaults: bool) -> argparse.ArgumentParser:
    """The options every command takes, before or after its name."""
    common = argparse.ArgumentParser(add_help=False)
    add_connection_options(common, defaults)
    common.add_argument("--json", action="store_true", default=False if defaults else argparse.SUPPRESS,
                        help="print JSON instead of a table")
    return common


def front_parser() -> argparse.ArgumentParser:
    """The command name and the options given before it; the rest goes to the command's own parser."""
    front = argparse.ArgumentParser(
        prog="delayed", usage="%(prog)s [-h] [--version] [OPTIONS] COMMAND ...", parents=[_common(defaults=False)],
        description=__doc__,
        epilog="commands: stats, workers, dead, scheduled, enqueue, task, cancel, pause, resume (operate the queues); "
               "worker, sweeper, scheduler (run one, as python -m delayed.worker etc.); metrics (the queues' Prometheus "
               "exporter, as python -m delayed.metrics); dashboard (the web page, as python -m delayed.dashboard); "
               "contract (go-delayed handlers' contracts, and typed code: contract go, check, python, gotasks). "
               "`delayed COMMAND --help` for each.")
    front.add_argument("--version", action="version", version=f"%(prog)s {version('delayed')}")
    front.add_argument("command", choices=[*OPERATIONS, *PROGRAMS], metavar="COMMAND", nargs="?",
                       help="one of the commands below")
    front.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return front


def parser() -> argparse.ArgumentParser:
    """`delayed`'s parser of its own commands (OPERATIONS), each with the common options."""
    common = _common(defaults=True)
    top = argparse.ArgumentParser(prog="delayed", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)
    for command in OPERATIONS.values():
        command.arguments(commands.add_parser(command.name, parents=[common] if command.common else [],
                                              help=command.help))
    return top


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`delayed [OPTIONS] COMMAND ...`: the options before COMMAND go after it, to COMMAND's own parser;
    a closed stdout, even under --help, ends it quietly."""
    return quiet_on_closed_pipe(lambda: _main(argv))


def _main(argv: Optional[Sequence[str]]) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    front = front_parser()
    first = front.parse_args(words)
    if first.command is None:
        front.error(f"a COMMAND is needed, one of: {', '.join([*OPERATIONS, *PROGRAMS])}")
    given = words[: len(words) - len(first.rest) - 1]
    if first.command in PROGRAMS:
        return PROGRAMS[first.command].main([*first.rest, *given])

    def command(args: argparse.Namespace) -> int:
        try:
            conn = connect_checked(args)
            check_queue_names(conn, _named_queues(args))
            OPERATIONS[args.command].run(conn, args)
        except KeyboardInterrupt:
            pass
        except redis.RedisError as exc:  # e.g. --queue naming another program's key: WRONGTYPE
            raise CommandError(f"Redis error: {error_text(exc)}") from None
        return 0

    return run_command("delayed", command, parser(), [first.command, *first.rest, *given])

