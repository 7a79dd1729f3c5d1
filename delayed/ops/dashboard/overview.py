"""The overview, /: every queue's counts and throughput (and, for a queue with limits per key, what they
hold back), its workers, who holds what, a page of dead letters and of scheduled tasks per queue, the
periodic entries, and the unswept queues."""
import time

import flask

from .. import admin, limits, stalls
from .board import PAGE, Reply, current
from .charts import chart
from .sampler import series

pages = flask.Blueprint("overview", __name__)


@pages.get("/")
def index() -> Reply:
    board = current()
    conn, sampler = board.conn, board.sampler
    found = board.names()
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
    stalled = stalls.scan(conn, found)
    refresh = flask.request.args.get("refresh", type=int)
    return flask.render_template(
        "index.html", rows=rows, charts=charts, limits=limits.read(conn, rows), workers=admin.workers(conn, found),
        holders=admin.holders(conn, found), letters=letters, page=PAGE, scheduled=upcoming,
        periodic=admin.periodic(conn, found), every=sampler.every, window=sampler.window,
        unswept=[(row["queue"], admin.unswept_warning(row)) for row in admin.unswept(conn, found)],
        stalled=[(queue, step, stalls.warning(queue, step)) for queue, steps in stalled.stalled.items() for step in steps],
        stall_bounds=stalls.bounds(stalled),
        refresh=refresh if refresh and refresh > 0 else None)
