"""A tracked task's page, /task, found by id on any queue, and its cancel button."""
import flask
from werkzeug.wrappers import Response

from ...errors import TaskNotFoundError
from .. import admin
from .board import Reply, current, message, queue_named

pages = flask.Blueprint("task", __name__)


@pages.get("/task")
def show() -> Reply:
    """A tracked task found by id on any queue: its record, arguments, result and error, its traceback and dead
    letter once it failed, and a cancel button while it waits."""
    task_id = flask.request.args.get("id", "").strip()
    if not task_id:
        return message("No task id", "Say which task: ?id=ID (its handle's .id).", 400)
    found = admin.tracked_task(current().conn, task_id)
    if found is None:
        return message("No such task", f"There is no tracked task {task_id} on any queue: it was never "
                       "tracked (enqueued without result_ttl), or its record expired.", 404)
    return flask.render_template("task.html", task=found)


@pages.post("/task/cancel")
def cancel() -> Response:
    queue, task_id = queue_named(), flask.request.form.get("id", "")
    try:
        outcome = admin.cancel_task(current().conn, queue, task_id)
    except TaskNotFoundError as exc:
        flask.flash(str(exc), "error")
    else:
        flask.flash(outcome.reason, "done" if outcome else "error")
    return flask.redirect(flask.url_for("task.show", id=task_id), 303)
