"""One queue's page, /queue, a tab at a time (pending, processing, scheduled, dead), and the changes made
to a queue from the pages: pause or resume it, run a scheduled task now or delete it."""
from typing import Any, Callable, Dict

import flask
import redis
from werkzeug.wrappers import Response

from ...errors import DeadLetterError
from .. import admin, limits
from .board import PAGE, Reply, back, current, dead_filter, message, queue_named

QUEUE_PAGE = 50
"""Tasks a queue's pending and scheduled tabs show at a time."""
SUMMARY = 1000
"""Tasks at the head of a queue its pending tab counts by function."""
MAX_START = 10 ** 9
"""The furthest position a tab pages to (a larger one would not reach Redis as an integer)."""
TABS = ("pending", "processing", "scheduled", "dead")
LIMIT_KEYS = 20
"""Limit keys a queue's page shows, those holding back the most tasks first."""

pages = flask.Blueprint("queue", __name__)


@pages.get("/queue")
def page() -> Reply:
    """One queue, a tab at a time: pending (in order, and counted by function), processing, scheduled, dead;
    above the tabs, the limits in force on it, if any (delayed.ops.limits)."""
    conn = current().conn
    queue, tab, args = queue_named(), flask.request.args.get("tab", "pending"), flask.request.args
    if tab not in TABS:
        return message("No such tab", f"A queue's tabs are {', '.join(TABS)}.", 404)
    start = min(max(0, args.get("start", 0, type=int)), MAX_START)
    shown: Dict[str, Any] = {}
    if tab == "pending":
        shown = {"tasks": admin.pending(conn, queue, start, QUEUE_PAGE),
                 "summary": admin.pending_by_func(conn, queue, SUMMARY), "summarised": SUMMARY}
    elif tab == "processing":
        shown = {"holders": admin.holders(conn, [queue])}
    elif tab == "scheduled":
        shown = {"tasks": admin.scheduled(conn, queue, QUEUE_PAGE, start, refs=True)}
    else:
        reason, func = dead_filter()
        try:
            letters, after = admin.filtered_dead(conn, queue, args.get("after") or None, reason, func, PAGE)
        except DeadLetterError as exc:
            return message("No such dead letter", str(exc), 404)
        shown = {"letters": letters, "after": after, "reason": reason, "func": func,
                 "through": admin.newest_dead(conn, queue)}
    row = admin.stats(conn, [queue])[0]
    limited = limits.read(conn, [row]).get(queue)
    if limited:
        shown.update(limits=limited, limit_keys=LIMIT_KEYS, limits_summary=limits.summary(limited),
                     limits_unshown=limits.unshown(limited, LIMIT_KEYS))
    return flask.render_template("queue.html", queue=queue, tab=tab, tabs=TABS, row=row, start=start,
                                 page=QUEUE_PAGE, **shown)


@pages.post("/queue/pause")
def pause() -> Response:
    queue, pausing = queue_named(), flask.request.form.get("paused") == "yes"
    changed = admin.set_paused(current().conn, queue, pausing)
    if not changed:
        flask.flash(f"{queue} was {'paused' if pausing else 'not paused'} already", "done")
    elif pausing:
        flask.flash(f"paused {queue}: our workers take no new task from it (go-delayed's workers do not "
                    "know about pausing)", "done")
    else:
        flask.flash(f"resumed {queue}: our workers take its tasks again", "done")
    return back("queues")


@pages.post("/scheduled/run")
def run_scheduled() -> Response:
    return _on_scheduled(admin.run_scheduled, "moved the scheduled task into {queue}: it runs next")


@pages.post("/scheduled/delete")
def delete_scheduled() -> Response:
    return _on_scheduled(admin.delete_scheduled, "deleted the scheduled task of {queue}")


def _on_scheduled(action: Callable[[redis.Redis, str, str], bool], done: str) -> Response:
    """Run or delete the scheduled task the form's ref names, and say which happened."""
    queue = queue_named()
    if action(current().conn, queue, flask.request.form.get("ref", "")):
        flask.flash(done.format(queue=queue), "done")
    else:
        flask.flash(f"that task is no longer scheduled in {queue} (it became due, or was cancelled, run or "
                    "deleted meanwhile): nothing was changed", "error")
    return flask.redirect(flask.url_for("queue.page", queue=queue, tab="scheduled"), 303)
