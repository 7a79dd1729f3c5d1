"""What every page of the dashboard shares: its state (Board), the queue a request names, the way back
after a change, a message page, and the page a Redis error gets."""
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union, cast

import flask
import redis
from werkzeug.wrappers import Response

from ...protocol.redis_errors import error_text, refused_credentials
from ...wire.keys import check_queue_name
from .. import admin
from .sampler import Sampler

BOARD = "delayed_dashboard"
"""Where an app keeps its Board (flask's app.extensions)."""
PAGE = 20
"""Dead letters (and scheduled tasks, on the overview) a page shows at a time."""

Reply = Union[str, Response, Tuple[str, int]]


@dataclass(frozen=True)
class Board:
    """One dashboard's state: the connection its pages read through (with delayed.ops.admin), the queues
    it was told to show (none: every queue found), its throughput sampler, the token every request must
    carry (None: loopback only) and its CSRF secret."""

    conn: redis.Redis
    chosen: List[str]
    sampler: Sampler
    token: Optional[str]
    csrf: str

    def names(self) -> List[str]:
        """The queues to show: those chosen, else every queue found now."""
        return self.chosen or admin.queue_names(self.conn)


def current() -> Board:
    """The Board of the app serving this request."""
    return cast(Board, flask.current_app.extensions[BOARD])


def template_values() -> Dict[str, Any]:
    """What every template may use: the CSRF secret its forms carry, and admin's preview size and latency bases."""
    return {"csrf": current().csrf, "preview_bytes": admin.PREVIEW_BYTES, "latency_bases": admin.LATENCY_BASES}


def queue_named() -> str:
    """The queue a request names, or a 400 page saying what is wrong with it (see check_queue_name)."""
    queue = flask.request.values.get("queue", "")
    if not queue:
        flask.abort(message("No queue", "Say which queue: ?queue=NAME.", 400))
    try:
        check_queue_name(queue)
    except ValueError as exc:
        flask.abort(message("No such queue", str(exc), 400))
    return queue


def dead_filter() -> Tuple[str, str]:
    """The reason and func a dead tab filters by (empty: any), as a request carries them."""
    return flask.request.values.get("reason", ""), flask.request.values.get("func", "")


def back(section: str = "dead") -> Response:
    """After a change: back to where the form was, the overview's section or (back=tab) the queue's dead tab
    with its filter (a reload then does not repeat it)."""
    if section == "dead" and flask.request.form.get("back") == "tab":
        reason, func = dead_filter()
        return flask.redirect(flask.url_for("queue.page", queue=queue_named(), tab="dead", reason=reason or None,
                                            func=func or None), 303)
    return flask.redirect(flask.url_for("overview.index") + "#" + section, 303)


def message(title: str, text: str, status: int) -> Response:
    return flask.make_response(flask.render_template("message.html", title=title, text=text), status)


def redis_error(exc: redis.RedisError) -> Reply:
    """The page for a Redis error: refused credentials, Redis unreachable, or a command refused."""
    if refused_credentials(exc):  # redis-py's AuthenticationError is a ConnectionError: Redis answered, though
        return message("Redis refused the credentials", f"Redis refused the dashboard's credentials: "
                       f"{error_text(exc).rstrip('.')}. Check the password or ACL user in its Redis URL.", 503)
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        return message("Redis is unreachable", f"The dashboard cannot reach Redis: {error_text(exc).rstrip('.')}. "
                       "Reload the page once it is back.", 503)
    return message("Redis error", f"Redis refused a command: {error_text(exc)}", 500)
