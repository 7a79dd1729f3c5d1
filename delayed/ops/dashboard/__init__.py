"""A web dashboard of the queues (the `dashboard` extra: flask, waitress): `python -m delayed.dashboard`.

create_app(conn, token=None) builds the Flask app. Flask is imported only when it is called, so
`import delayed` (and `delayed.__main__`, which lists `delayed dashboard`) works without the extra.
The app reads and changes Redis only through delayed.ops.admin; delayed.ops.dashboard.sampler keeps the
throughput charts.
"""
from typing import TYPE_CHECKING, Optional, Sequence

import redis

if TYPE_CHECKING:
    import flask


def create_app(conn: redis.Redis, token: Optional[str] = None, queues: Optional[Sequence[str]] = None,
               sample_every: float = 5.0, window: float = 600.0) -> "flask.Flask":
    """The dashboard's Flask app over conn, showing queues (default: every queue found). With a token,
    every request must carry it; without one, only requests to a loopback host name are served. The
    throughput charts sample admin.stats every sample_every seconds and show the last window seconds."""
    from .app import build

    return build(conn, token=token, queues=queues, sample_every=sample_every, window=window)
