"""A tracked task's page, /task, found by id on any queue, with its workflow's steps when it is a step,
and its cancel button; a workflow's page, at the same address, for a workflow's id."""
from typing import Any, Dict, Optional

import flask
from werkzeug.wrappers import Response

from ...errors import TaskNotFoundError
from .. import admin, flows, stalls
from .board import Reply, current, message, queue_named
from .flow_graph import layout

pages = flask.Blueprint("task", __name__)


@pages.get("/task")
def show() -> Reply:
    """A tracked task found by id on any queue: its record, arguments, result and error, its traceback and dead
    letter once it failed, a cancel button while it waits or runs, and its workflow if it is a step; or, for a
    workflow's id, the workflow."""
    task_id = flask.request.args.get("id", "").strip()
    if not task_id:
        return message("No task id", "Say which task: ?id=ID (its handle's .id).", 400)
    conn = current().conn
    found = flows.located(conn, task_id)
    task = admin.tracked_task(conn, task_id, found.tasks[0]) if found.tasks else None
    if task is not None:
        workflow = flows.workflow_of(conn, task["queue"], task_id)
        return flask.render_template("task.html", task=task,
                                     workflow=None if workflow is None else _workflow(*workflow, step=task_id))
    shown = _workflow(found.workflows[0], task_id) if found.workflows else None
    if shown is None:
        return message("No such task", f"There is no tracked task {task_id} on any queue, nor a workflow of that "
                       "id: it was never tracked (enqueued without result_ttl), or its record expired.", 404)
    return flask.render_template("workflow.html", workflow=shown)


def _workflow(queue: str, flow_id: str, step: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """What the templates show of a workflow (flows.view, its steps' rows with their "after" and "note" in
    words, its times in ISO 8601, its warnings and its graph), or None if it is gone."""
    try:
        shown = flows.view(current().conn, queue, flow_id, current=step)
    except TaskNotFoundError:
        return None
    row = shown.as_dict()
    for name in ("created_at", "finished_at"):
        row[name] = None if row[name] is None else admin.utc_time(row[name])
    row["steps"] = [{**step, "after": flows.after_text(step["after"]), "note": flows.note(step)}
                    for step in row["steps"]]
    return {**row, "warnings": shown.warnings(), "graph": layout(shown),
            "cancellable": row["status"] in stalls.LOOKED}


@pages.post("/task/cancel")
def cancel() -> Response:
    """Cancel a tracked task, waiting or running, or (workflow=1) every step of a workflow."""
    queue, task_id = queue_named(), flask.request.form.get("id", "")
    cancelling = admin.cancel_workflow if flask.request.form.get("workflow") else admin.cancel_task
    try:
        outcome = cancelling(current().conn, queue, task_id)
    except TaskNotFoundError as exc:
        flask.flash(str(exc), "error")
    else:
        flask.flash(outcome.reason, "done" if outcome else "error")
    return flask.redirect(flask.url_for("task.show", id=task_id), 303)
