"""Sentry error reports for delayed's workers: `SentryMiddleware`.

Each run of a task is in a Sentry isolation scope of its own, tagged with the task's function, id,
queue and retries, so an exception the function raises reaches Sentry with them (and so does anything the
function reports itself, `sentry_sdk.capture_message` say); a run that returns sends nothing.
"""
import contextlib
from typing import Any, Dict, Iterator

import sentry_sdk
from sentry_sdk.utils import event_from_exception

from ..wire.hooks import Call, Middleware

MECHANISM = "delayed"
"""The exception mechanism's type an event carries: the error was raised in a task, not caught by it."""
CONTEXT = "delayed"
"""The name of the event's context that holds the whole call (args left out)."""


class SentryMiddleware(Middleware):
    """Report a task's exception to Sentry, tagged with the task's function, id, queue and retries.

    Call `sentry_sdk.init(dsn=...)` in the worker's process first (in the module that defines the
    middleware, say); without it, nothing is sent. Tags, on every event of the run: `delayed.func`
    (also the event's transaction), `delayed.task_id` (a tracked task's), `delayed.queue`,
    `delayed.attempt` (runs that failed before this one), `delayed.max_retries`; the `delayed` context
    has them all and the worker's id. Each failed run is one event, a retried one included (its
    `delayed.attempt` says which); a cancelled coroutine's `CancelledError` is not an error, and is not
    reported.
    """

    @contextlib.contextmanager
    def around_call(self, call: Call) -> Iterator[None]:
        """Run the call in an isolation scope carrying its tags; report what it raises, then raise it on."""
        with sentry_sdk.isolation_scope() as scope:
            about = _about(call)
            scope.set_transaction_name(call.func_path, source="task")
            for name, value in about.items():
                if name != "worker_id" and value is not None:
                    scope.set_tag(f"delayed.{name}", str(value))
            scope.set_context(CONTEXT, about)
            try:
                yield
            except Exception as error:
                _report(error)
                raise


def _about(call: Call) -> Dict[str, Any]:
    options = call.task.options
    return {"func": call.func_path, "task_id": call.id, "queue": call.queue, "attempt": call.attempt,
            "max_retries": options.max_retries, "worker_id": call.worker_id}


def _report(error: Exception) -> None:
    """Send error as an unhandled exception of the delayed mechanism (what the SDK's own integrations do)."""
    client = sentry_sdk.get_client()
    if not client.is_active():
        return
    event, hint = event_from_exception(error, client_options=client.options,
                                       mechanism={"type": MECHANISM, "handled": False})
    sentry_sdk.capture_event(event, hint=hint)
