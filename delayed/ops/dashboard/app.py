"""The dashboard's pages and actions (Flask): read with delayed.ops.admin, change only through it.

Security model:
- With a token, every request carries it: `?token=` once (it is then kept in an HttpOnly, SameSite=Strict
  cookie, and the URL is redirected without it), the cookie, or `Authorization: Bearer TOKEN`; compared
  with hmac.compare_digest. Without one (served on loopback only, which the command line enforces),
  the Host header must name a loopback host, so a web page cannot reach the dashboard by DNS rebinding.
- Every change is a POST carrying a CSRF token (a random secret of this process, in a hidden field,
  compared with hmac.compare_digest); a GET never changes Redis (it reads dead letters with
  migrate=False: an old N_dead list moves into the stream at the first POST on that queue).
- Everything shown is escaped by Jinja2's autoescape; the Content-Security-Policy allows no script
  and nothing from elsewhere.
"""
import hmac
import secrets
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union
from urllib.parse import urlencode

import flask
import redis
from werkzeug.wrappers import Response

from .. import admin
from ...protocol.redis_errors import error_text, refused_credentials
from ...errors import DeadLetterError, TaskNotFoundError
from ...wire.keys import check_queue_name
from .charts import chart
from .sampler import Sampler, series

TOKEN_COOKIE = "delayed_dashboard_token"
PAGE = 20
QUEUE_PAGE = 50
"""Tasks a queue's pending and scheduled tabs show at a time."""
SUMMARY = 1000
"""Tasks at the head of a queue its pending tab counts by function."""
MAX_START = 10 ** 9
"""The furthest position a tab pages to (a larger one would not reach Redis as an integer)."""
TABS = ("pending", "processing", "scheduled", "dead")
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]"}
CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
       "base-uri 'none'")

Reply = Union[str, Response, Tuple[str, int]]


def build(conn: redis.Redis, token: Optional[str] = None, queues: Optional[Sequence[str]] = None,
          sample_every: float = 5.0, window: float = 600.0) -> flask.Flask:
    app = flask.Flask(__name__)
    app.secret_key = secrets.token_bytes(32)  # signs the session cookie that carries flashed messages
    app.config.update(SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Strict")
    csrf = secrets.token_urlsafe(32)
    chosen = list(queues or [])
    sampler = Sampler(conn, chosen, every=sample_every, window=window).start()
    app.extensions["delayed_sampler"] = sampler

    def names() -> List[str]:
        return chosen or admin.queue_names(conn)

    @app.context_processor
    def common() -> Dict[str, Any]:
        return {"csrf": csrf, "preview_bytes": admin.PREVIEW_BYTES, "latency_bases": admin.LATENCY_BASES}

    @app.before_request
    def guard() -> Optional[Reply]:
        if token is None:
            if _host_name(flask.request.host) not in LOOPBACK_HOSTS:
                return _message("Forbidden", "This dashboard answers only to a loopback host name "
                                "(127.0.0.1, localhost); serve it with --token to reach it otherwise.", 403)
        else:
            given = flask.request.args.get("token")
            if given is not None:
                if not hmac.compare_digest(given.encode(), token.encode()):
                    return _message("Unauthorized", "Wrong token.", 401)
                args = {key: value for key, value in flask.request.args.items() if key != "token"}
                reply = flask.redirect(flask.request.path + ("?" + urlencode(args) if args else ""), 303)
                reply.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict")
                return reply
            header = flask.request.headers.get("Authorization", "")
            sent = header[7:] if header.startswith("Bearer ") else flask.request.cookies.get(TOKEN_COOKIE, "")
            if not hmac.compare_digest(sent.encode(), token.encode()):
                return _message("Unauthorized", "This dashboard needs its token: open it once with ?token=TOKEN "
                                "(or send Authorization: Bearer TOKEN).", 401)
        if flask.request.method == "POST":
            sent = flask.request.form.get("csrf", "")
            if not hmac.compare_digest(sent.encode(), csrf.encode()):
                return _message("Forbidden", "The form's CSRF token is missing or wrong (the dashboard may have "
                                "restarted): reload the page and try again. Nothing was changed.", 403)
        return None

    @app.after_request
    def headers(reply: Response) -> Response:
        reply.headers["Content-Security-Policy"] = CSP
        reply.headers["X-Content-Type-Options"] = "nosniff"
        reply.headers["Referrer-Policy"] = "no-referrer"
        reply.headers["Cache-Control"] = "no-store"
        return reply

    @app.errorhandler(redis.RedisError)
    def redis_error(exc: redis.RedisError) -> Reply:
        if refused_credentials(exc):  # redis-py's AuthenticationError is a ConnectionError: Redis answered, though
            return _message("Redis refused the credentials", f"Redis refused the dashboard's credentials: "
                            f"{error_text(exc).rstrip('.')}. Check the password or ACL user in its Redis URL.", 503)
        if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
            return _message("Redis is unreachable", f"The dashboard cannot reach Redis: {error_text(exc).rstrip('.')}. "
                            "Reload the page once it is back.", 503)
        return _message("Redis error", f"Redis refused a command: {error_text(exc)}", 500)

    @app.get("/")
    def index() -> Reply:
        found = names()
        sampler.include(found)
        history = sampler.history(found)
        rows = admin.estimated(admin.stats(conn, found), sampler.latest(history))
        rates, now = series(history), time.time()
        charts = {row["queue"]: {field: chart(points, now, sampler.window)
                                 for field, points in rates.get(row["queue"], {}).items()} for row in rows}
        letters = {row["queue"]: [admin.describe_dead(entry) for entry in admin.dead_letters(conn, row["queue"],
                                                                                            count=PAGE, migrate=False)]
                   for row in rows if row["dead"]}
        upcoming = {row["queue"]: admin.scheduled(conn, row["queue"], PAGE) for row in rows if row["scheduled"]}
        refresh = flask.request.args.get("refresh", type=int)
        return flask.render_template(
            "index.html", rows=rows, charts=charts, workers=admin.workers(conn, found),
            holders=admin.holders(conn, found), letters=letters, page=PAGE, scheduled=upcoming,
            periodic=admin.periodic(conn, found), every=sampler.every, window=sampler.window,
            unswept=[(row["queue"], admin.unswept_warning(row)) for row in admin.unswept(conn, found)],
            refresh=refresh if refresh and refresh > 0 else None)

    @app.get("/queue")
    def queue_page() -> Reply:
        """One queue, a tab at a time: pending (in order, and counted by function), processing, scheduled, dead."""
        queue, tab, args = _queue(), flask.request.args.get("tab", "pending"), flask.request.args
        if tab not in TABS:
            return _message("No such tab", f"A queue's tabs are {', '.join(TABS)}.", 404)
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
            reason, func = args.get("reason", ""), args.get("func", "")
            try:
                letters, after = admin.filtered_dead(conn, queue, args.get("after") or None, reason, func, PAGE)
            except DeadLetterError as exc:
                return _message("No such dead letter", str(exc), 404)
            shown = {"letters": letters, "after": after, "reason": reason, "func": func,
                     "through": admin.newest_dead(conn, queue)}
        return flask.render_template("queue.html", queue=queue, tab=tab, tabs=TABS, row=admin.stats(conn, [queue])[0],
                                     start=start, page=QUEUE_PAGE, **shown)

    def on_scheduled(action: Callable[[redis.Redis, str, str], bool], done: str) -> Response:
        """Run or delete the scheduled task the form's ref names, and say which happened."""
        queue = _queue()
        if action(conn, queue, flask.request.form.get("ref", "")):
            flask.flash(done.format(queue=queue), "done")
        else:
            flask.flash(f"that task is no longer scheduled in {queue} (it became due, or was cancelled, run or "
                        "deleted meanwhile): nothing was changed", "error")
        return flask.redirect(flask.url_for("queue_page", queue=queue, tab="scheduled"), 303)

    @app.post("/scheduled/run")
    def run_scheduled() -> Response:
        return on_scheduled(admin.run_scheduled, "moved the scheduled task into {queue}: it runs next")

    @app.post("/scheduled/delete")
    def delete_scheduled() -> Response:
        return on_scheduled(admin.delete_scheduled, "deleted the scheduled task of {queue}")

    @app.get("/dead")
    def dead_list() -> Reply:
        queue = _queue()
        after = flask.request.args.get("after") or None
        try:
            letters = [admin.describe_dead(entry) for entry in admin.dead_letters(conn, queue, after, PAGE, migrate=False)]
        except DeadLetterError as exc:
            return _message("No such dead letter", str(exc), 404)
        return flask.render_template("dead.html", queue=queue, letters=letters, after=after, page=PAGE)

    @app.get("/dead/show")
    def dead_show() -> Reply:
        queue, letter_id = _queue(), flask.request.args.get("id", "")
        try:
            letter = admin.describe_dead(admin.dead_letter(conn, queue, letter_id, migrate=False))
        except DeadLetterError as exc:
            return _message("No such dead letter", str(exc), 404)
        return flask.render_template("letter.html", queue=queue, letter=letter)

    @app.get("/dead/raw")
    def dead_raw() -> Reply:
        """A letter's task, its raw bytes, as a download: pages show previews, never a whole blob."""
        queue, letter_id = _queue(), flask.request.args.get("id", "")
        try:
            letter = admin.dead_letter(conn, queue, letter_id, migrate=False, whole=True)
        except DeadLetterError as exc:
            return _message("No such dead letter", str(exc), 404)
        if letter["task"] is None:
            return _message("No task", f"Dead letter {letter_id} holds no task.", 404)
        return flask.Response(letter["task"], mimetype="application/octet-stream", headers={
            "Content-Disposition": f'attachment; filename="dead-letter-{letter_id}.msgpack"'})

    @app.get("/dead/purge")
    def purge_confirm() -> Reply:
        """What a purge would delete: every letter of the queue, or (from its dead tab) those the tab's filter
        takes, counted now (reading them in chunks); the POST deletes no letter written since."""
        queue, (reason, func) = _queue(), _filter()
        count, through = admin.count_dead(conn, queue, reason, func)
        return flask.render_template("purge.html", queue=queue, count=count, through=through, reason=reason, func=func,
                                     tab=flask.request.args.get("back") == "tab")

    @app.get("/task")
    def task() -> Reply:
        """A tracked task found by id on any queue: its record, arguments, result and error, its traceback and dead
        letter once it failed, and a cancel button while it waits."""
        task_id = flask.request.args.get("id", "").strip()
        if not task_id:
            return _message("No task id", "Say which task: ?id=ID (its handle's .id).", 400)
        found = admin.tracked_task(conn, task_id)
        if found is None:
            return _message("No such task", f"There is no tracked task {task_id} on any queue: it was never "
                            "tracked (enqueued without result_ttl), or its record expired.", 404)
        return flask.render_template("task.html", task=found)

    @app.post("/task/cancel")
    def cancel() -> Response:
        queue, task_id = _queue(), flask.request.form.get("id", "")
        try:
            outcome = admin.cancel_task(conn, queue, task_id)
        except TaskNotFoundError as exc:
            flask.flash(str(exc), "error")
        else:
            flask.flash(outcome.reason, "done" if outcome else "error")
        return flask.redirect(flask.url_for("task", id=task_id), 303)

    @app.post("/queue/pause")
    def pause() -> Response:
        queue, pausing = _queue(), flask.request.form.get("paused") == "yes"
        changed = admin.set_paused(conn, queue, pausing)
        if not changed:
            flask.flash(f"{queue} was {'paused' if pausing else 'not paused'} already", "done")
        elif pausing:
            flask.flash(f"paused {queue}: our workers take no new task from it (go-delayed's workers do not "
                        "know about pausing)", "done")
        else:
            flask.flash(f"resumed {queue}: our workers take its tasks again", "done")
        return _back("queues")

    @app.post("/dead/requeue")
    def requeue() -> Response:
        """Requeue one letter, or all (id "all"): from a dead tab, those its filter takes, up to the newest
        letter the tab showed (through)."""
        queue, letter_id = _queue(), flask.request.form.get("id", "")
        reason, func = _filter() if letter_id == "all" else ("", "")  # one letter's form carries the tab's filter back
        try:
            moved = admin.requeue_dead(conn, queue, None if letter_id == "all" else [letter_id], reason=reason, func=func,
                                       through=flask.request.form.get("through") or None)
        except DeadLetterError as exc:
            flask.flash(str(exc), "error")
        else:
            flask.flash(f"requeued {moved} task{'s' * (moved != 1)} into {queue}{admin.matching(reason, func)}", "done")
        return _back()

    @app.post("/dead/delete")
    def delete() -> Response:
        queue, letter_id = _queue(), flask.request.form.get("id", "")
        try:
            deleted = admin.delete_dead(conn, queue, [letter_id])
        except DeadLetterError as exc:
            flask.flash(str(exc), "error")
        else:
            flask.flash(f"deleted {deleted} dead letter{'s' * (deleted != 1)} of {queue}", "done")
        return _back()

    @app.post("/dead/purge")
    def purge() -> Response:
        """Delete every letter at once; or, from a dead tab's filter, those it takes up to the newest letter
        the confirm page counted (through), in chunks."""
        queue, (reason, func) = _queue(), _filter()
        if flask.request.form.get("confirm") != "yes":  # only the confirm page's form says yes
            return flask.redirect(flask.url_for("purge_confirm", queue=queue, reason=reason or None, func=func or None,
                                                back=flask.request.values.get("back")), 303)
        try:
            purged = admin.purge_dead(conn, queue, reason, func, flask.request.form.get("through") or None)
        except DeadLetterError as exc:
            flask.flash(str(exc), "error")
        else:
            flask.flash(f"purged {purged} dead letter{'s' * (purged != 1)} of {queue}{admin.matching(reason, func)}", "done")
        return _back()

    return app


def _host_name(host: str) -> str:
    """A Host header without its port: "127.0.0.1:8080" -> "127.0.0.1", "[::1]:8080" -> "[::1]"."""
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() and not host.endswith("]") else host


def _queue() -> str:
    """The queue a request names, or a 400 page saying what is wrong with it (see check_queue_name)."""
    queue = flask.request.values.get("queue", "")
    if not queue:
        flask.abort(_message("No queue", "Say which queue: ?queue=NAME.", 400))
    try:
        check_queue_name(queue)
    except ValueError as exc:
        flask.abort(_message("No such queue", str(exc), 400))
    return queue


def _filter() -> Tuple[str, str]:
    """The reason and func a dead tab filters by (empty: any), as a request carries them."""
    return flask.request.values.get("reason", ""), flask.request.values.get("func", "")


def _back(section: str = "dead") -> Response:
    """After a change: back to where the form was, the overview's section or (back=tab) the queue's dead tab
    with its filter (a reload then does not repeat it)."""
    if section == "dead" and flask.request.form.get("back") == "tab":
        reason, func = _filter()
        return flask.redirect(flask.url_for("queue_page", queue=_queue(), tab="dead", reason=reason or None,
                                            func=func or None), 303)
    return flask.redirect(flask.url_for("index") + "#" + section, 303)


def _message(title: str, text: str, status: int) -> Response:
    return flask.make_response(flask.render_template("message.html", title=title, text=text), status)
