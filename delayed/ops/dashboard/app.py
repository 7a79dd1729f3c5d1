"""The dashboard's Flask app, assembled: its settings, its state (board.Board), the guard every request
passes (security), and its pages, a blueprint per area: the overview, a queue's page, dead letters, tracked
tasks. Pages read with delayed.ops.admin, and change Redis only through it."""
import secrets
from typing import Optional, Sequence

import flask
import redis

from . import dead_letters, overview, queue_page, security, task_page
from .board import BOARD, Board, redis_error, template_values
from .sampler import Sampler

PAGES = (overview.pages, queue_page.pages, dead_letters.pages, task_page.pages)
"""The dashboard's pages, a blueprint per area: a new page goes into the area's module, or a module of its own
listed here."""


def build(conn: redis.Redis, token: Optional[str] = None, queues: Optional[Sequence[str]] = None,
          sample_every: float = 5.0, window: float = 600.0) -> flask.Flask:
    """The app create_app describes."""
    app = flask.Flask(__name__)
    app.secret_key = secrets.token_bytes(32)  # signs the session cookie that carries flashed messages
    app.config.update(SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Strict")
    chosen = list(queues or [])
    sampler = Sampler(conn, chosen, every=sample_every, window=window).start()
    app.extensions["delayed_sampler"] = sampler
    app.extensions[BOARD] = Board(conn, chosen, sampler, token, csrf=secrets.token_urlsafe(32))
    app.before_request(security.guard)
    app.after_request(security.headers)
    app.register_error_handler(redis.RedisError, redis_error)
    app.context_processor(template_values)
    for pages in PAGES:
        app.register_blueprint(pages)
    return app
