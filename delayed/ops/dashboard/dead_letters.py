"""A queue's dead letters: their pages (/dead, a letter, its task's bytes, a purge's confirmation) and the
changes made to them (requeue, delete, purge)."""
import flask
from werkzeug.wrappers import Response

from ...errors import DeadLetterError
from .. import admin
from .board import PAGE, Reply, back, current, dead_filter, message, queue_named

pages = flask.Blueprint("dead", __name__)


@pages.get("/dead")
def letters() -> Reply:
    queue = queue_named()
    after = flask.request.args.get("after") or None
    try:
        shown = [admin.describe_dead(entry)
                 for entry in admin.dead_letters(current().conn, queue, after, PAGE, migrate=False)]
    except DeadLetterError as exc:
        return message("No such dead letter", str(exc), 404)
    return flask.render_template("dead.html", queue=queue, letters=shown, after=after, page=PAGE)


@pages.get("/dead/show")
def show() -> Reply:
    queue, letter_id = queue_named(), flask.request.args.get("id", "")
    try:
        letter = admin.describe_dead(admin.dead_letter(current().conn, queue, letter_id, migrate=False))
    except DeadLetterError as exc:
        return message("No such dead letter", str(exc), 404)
    return flask.render_template("letter.html", queue=queue, letter=letter)


@pages.get("/dead/raw")
def raw() -> Reply:
    """A letter's task, its raw bytes, as a download: pages show previews, never a whole blob."""
    queue, letter_id = queue_named(), flask.request.args.get("id", "")
    try:
        letter = admin.dead_letter(current().conn, queue, letter_id, migrate=False, whole=True)
    except DeadLetterError as exc:
        return message("No such dead letter", str(exc), 404)
    if letter["task"] is None:
        return message("No task", f"Dead letter {letter_id} holds no task.", 404)
    return flask.Response(letter["task"], mimetype="application/octet-stream", headers={
        "Content-Disposition": f'attachment; filename="dead-letter-{letter_id}.msgpack"'})


@pages.get("/dead/purge")
def purge_confirm() -> Reply:
    """What a purge would delete: every letter of the queue, or (from its dead tab) those the tab's filter
    takes, counted now (reading them in chunks); the POST deletes no letter written since."""
    queue, (reason, func) = queue_named(), dead_filter()
    count, through = admin.count_dead(current().conn, queue, reason, func)
    return flask.render_template("purge.html", queue=queue, count=count, through=through, reason=reason, func=func,
                                 tab=flask.request.args.get("back") == "tab")


@pages.post("/dead/requeue")
def requeue() -> Response:
    """Requeue one letter, or all (id "all"): from a dead tab, those its filter takes, up to the newest
    letter the tab showed (through)."""
    queue, letter_id = queue_named(), flask.request.form.get("id", "")
    reason, func = dead_filter() if letter_id == "all" else ("", "")  # one letter's form carries the tab's filter back
    try:
        moved = admin.requeue_dead(current().conn, queue, None if letter_id == "all" else [letter_id], reason=reason,
                                   func=func, through=flask.request.form.get("through") or None)
    except DeadLetterError as exc:
        flask.flash(str(exc), "error")
    else:
        flask.flash(f"requeued {moved} task{'s' * (moved != 1)} into {queue}{admin.matching(reason, func)}", "done")
    return back()


@pages.post("/dead/delete")
def delete() -> Response:
    queue, letter_id = queue_named(), flask.request.form.get("id", "")
    try:
        deleted = admin.delete_dead(current().conn, queue, [letter_id])
    except DeadLetterError as exc:
        flask.flash(str(exc), "error")
    else:
        flask.flash(f"deleted {deleted} dead letter{'s' * (deleted != 1)} of {queue}", "done")
    return back()


@pages.post("/dead/purge")
def purge() -> Response:
    """Delete every letter at once; or, from a dead tab's filter, those it takes up to the newest letter
    the confirm page counted (through), in chunks."""
    queue, (reason, func) = queue_named(), dead_filter()
    if flask.request.form.get("confirm") != "yes":  # only the confirm page's form says yes
        return flask.redirect(flask.url_for("dead.purge_confirm", queue=queue, reason=reason or None,
                                            func=func or None, back=flask.request.values.get("back")), 303)
    try:
        purged = admin.purge_dead(current().conn, queue, reason, func, flask.request.form.get("through") or None)
    except DeadLetterError as exc:
        flask.flash(str(exc), "error")
    else:
        flask.flash(f"purged {purged} dead letter{'s' * (purged != 1)} of {queue}{admin.matching(reason, func)}", "done")
    return back()
