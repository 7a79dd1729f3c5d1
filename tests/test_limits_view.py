"""What `delayed stats`, the dashboard and the queue exporter show of the limits per key: each key's
limits, the slots it holds and the tasks it holds back (for a slot, for its rate), read in bounded
script calls and only for queues that have limits. Tasks are held by real admissions (admit.lua, as a
worker calls it) on a real redis-server; the dashboard is a real server, clicked in headless Chromium."""
import json
import re
from urllib.parse import urlencode

from delayed import PyTask, Queue
from delayed.ops import admin, limits
from delayed.ops.dashboard import queue_page
from delayed.protocol.connection import connect
from delayed.protocol.limits import DEFAULT_COUNT
from delayed.protocol.worker_ops import WorkerOps
from delayed.wire.keys import new_worker_id
from delayed.wire.limits import Admission, limit_of
from delayed.wire.options import TaskOptions

from . import tasks
from .conftest import spawn, stop, tags, wait_for
from .slowlog import every_command, sent
from .test_admin import delayed
from .test_dashboard import browser, dashboard, follow, snapshot  # noqa: F401  (fixtures)

ADMITTED, WAITING, SCHEDULED = Admission.ADMITTED, Admission.WAITING, Admission.SCHEDULED


def admit(queue: Queue, task: PyTask):
    """Enqueue task, claim it under a fresh id whose keep-alive is set, and admit it as a worker does:
    what admit.lua did, and the id (which holds the task while it is admitted)."""
    queue.enqueue(task)
    worker_id = new_worker_id()
    queue.conn.set(worker_id, 1, ex=3600)
    ops = WorkerOps(queue)
    [(_, blob)] = ops.claim_batch((), [worker_id]).tasks
    return ops.admit(worker_id, blob, limit_of(task.options, task.func_path))[0], worker_id


def held_queue(conn, key: str = "customer <42>") -> str:
    """Queue "api": key's concurrency_limit of 2 runs 2 tasks and holds 3 back for a slot; the rate_limit
    2/h of tests.tasks:record started 2 tasks and holds 1 back for its rate. The first id admitted."""
    queue = Queue("api", conn)
    admitted = [admit(queue, PyTask(tasks.record, [i], concurrency_limit=2, limit_key=key)) for i in range(5)]
    assert [what for what, _ in admitted] == [ADMITTED, ADMITTED, WAITING, WAITING, WAITING]
    rated = [admit(queue, PyTask(tasks.record, [i], rate_limit="2/h"))[0] for i in range(3)]
    assert rated == [ADMITTED, ADMITTED, SCHEDULED]
    return admitted[0][1]


def test_stats_shows_each_limit_key_its_limits_what_it_runs_and_what_it_holds_back(conn, redis_server):
    first = held_queue(conn)
    Queue("plain", conn).enqueue(PyTask(tasks.record, ["x"]))
    lines = delayed(redis_server.url, "stats").splitlines()
    assert lines[1].split() == ["api", "0", "4", "1", "0", "0", "no", "0.0s"]  # the 3 held for a slot: out of the queue
    assert lines[2].split()[:2] == ["plain", "1"] and lines[3] == ""
    assert lines[4] == "limits of api: 2 keys, 2 running, 3 held for a slot, 1 for their rate"
    assert lines[5].split() == ["LIMIT_KEY", "RATE_LIMIT", "STARTED", "SCHEDULED", "NEXT_DUE_IN", "CONCURRENCY_LIMIT",
                                "RUNNING", "WAITING"]
    assert re.fullmatch(r"customer <42> +2 +2 +3", lines[6])  # its rate's columns blank: it has none
    due_in = float(re.fullmatch(r"tests\.tasks:record +2/h +2 +1 +(\d+\.\d)", lines[7]).group(1))
    assert 0 < due_in <= 3600 and len(lines) == 8  # the held task's start: an hour after the first of the 2

    [row] = json.loads(delayed(redis_server.url, "stats", "--queue", "api", "--json"))
    assert row["limit_keys"] == 2 and row["limits_complete"] is True
    seen = [key.pop("last_admitted") for key in row["limits"]]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", at) for at in seen), seen
    assert 0 < row["limits"][1].pop("next_due_in") <= 3600
    assert row["limits"] == [
        {"limit_key": "customer <42>", "rate_limit": None, "concurrency_limit": 2, "running": 2, "waiting": 3,
         "scheduled": 0, "held": 3, "next_due_in": None, "started": 0},
        {"limit_key": "tests.tasks:record", "rate_limit": "2/h", "concurrency_limit": None, "running": 0,
         "waiting": 0, "scheduled": 1, "held": 1, "started": 2}]

    WorkerOps(Queue("api", conn)).claim_batch([first], ())  # it ends: its slot frees, and a held task goes to the queue
    [row] = json.loads(delayed(redis_server.url, "stats", "--queue", "api", "--json"))
    assert (row["pending"], row["processing"]) == (1, 3)
    assert [(key["running"], key["waiting"]) for key in row["limits"]] == [(1, 2), (0, 0)]


def test_stats_follows_a_real_worker_s_slots_and_the_tasks_it_holds_back_until_they_ran(conn, redis_server):
    queue = Queue("api", conn)
    queue.enqueue_many([PyTask(tasks.wait_for_key, [f"t{i}", "go"], concurrency_limit=2, limit_key="customer 7")
                        for i in range(5)])
    worker = spawn("delayed.worker", "--queue", "api", "--threads", "4", "tests.tasks", redis_url=redis_server.url)
    try:
        def held():
            [row] = json.loads(delayed(redis_server.url, "stats", "--queue", "api", "--json"))
            return [(key["limit_key"], key["running"], key["waiting"]) for key in row["limits"]]

        wait_for(lambda: held() == [("customer 7", 2, 3)], what="two tasks running and three held for a slot")
        conn.set("go", 1)
        wait_for(lambda: len(tags(conn)) == 5 and held() == [("customer 7", 0, 0)],
                 what="every task to run and free its slot")  # the key stays listed, holding nothing
    finally:
        stop(worker)


def test_with_many_keys_stats_shows_those_holding_back_most_read_a_bounded_call_at_a_time(conn, redis_server):
    queue = Queue("crowd", conn)
    for i in range(600):
        admit(queue, PyTask(tasks.record, [i], concurrency_limit=1, limit_key=f"customer {i:03}"))
    assert conn.object("encoding", "crowd_limits") == b"hashtable"  # not a listpack, which HSCAN reads whole
    for i, extra in ((7, 3), (123, 5), (200, 1)):
        assert {admit(queue, PyTask(tasks.record, [i], concurrency_limit=1, limit_key=f"customer {i:03}"))[0]
                for _ in range(extra)} == {WAITING}
    with every_command(conn):
        lines = delayed(redis_server.url, "stats", "--queue", "crowd", "--limit-keys", "2").splitlines()
        commands = sent(conn)
    peeks = [command for command in commands if any(call[:2] == [b"hscan", b"crowd_limits"] for call in command.calls)]
    keys_read = [sum(call[0] == b"scard" for call in command.calls) for command in peeks]
    assert sum(keys_read) >= 600 and len(peeks) >= 3 and max(keys_read) <= 2 * DEFAULT_COUNT, keys_read
    assert lines[3] == "limits of crowd: 600 keys, 600 running, 9 held for a slot, 0 for their rate"
    assert [line.split()[:2] + line.split()[-3:] for line in lines[5:7]] == [
        ["customer", "123", "1", "1", "5"], ["customer", "007", "1", "1", "3"]]
    assert lines[7:] == ["and 598 more keys, holding back 1 task: --json lists every key read"]

    [row] = json.loads(delayed(redis_server.url, "stats", "--queue", "crowd", "--json"))
    assert len(row["limits"]) == 600 and row["limits_complete"]
    assert [key["limit_key"] for key in row["limits"][:4]] == [
        "customer 123", "customer 007", "customer 200", "customer 000"]  # most held first, then by key

    [found] = limits.read(conn, admin.stats(conn, ["crowd"]), at_most=150).values()
    assert (len(found.keys), found.total, found.complete) == (150, 600, False)
    assert limits.summary(found).startswith("600 keys (the first 150 read), 150 running")


def test_stats_reads_nothing_of_a_queue_without_limits_but_the_length_of_its_registry(conn, redis_server):
    Queue("plain", conn).enqueue(PyTask(tasks.record, ["x"]))
    with every_command(conn):
        [row] = json.loads(delayed(redis_server.url, "stats", "--json"))
        commands = sent(conn)
    assert (row["queue"], row["limit_keys"], row["limits"], row["limits_complete"]) == ("plain", 0, [], True)
    touching = [command.command for command in commands
                if any(b"plain_limit" in arg for arg in command.command + sum(command.calls, []))]
    assert touching == [[b"HLEN", b"plain_limits"]]


def test_the_overview_tags_a_queue_with_limits_and_its_page_shows_them_as_text(conn, dashboard):  # noqa: F811
    held_queue(conn, key="<script>alert('key')</script>")
    web = dashboard()
    before = snapshot(conn)
    status, page = web.get("/")
    assert status == 200
    tag = re.search(r'<tr class="queue" data-queue="api">.*?<a class="tag limits"[^>]*>(.*?)</a>', page, re.S)
    assert tag.group(1) == "limits: 2 running, 4 held"
    status, page = web.get("/queue?" + urlencode({"queue": "api"}))
    assert status == 200 and "<script" not in page
    rows = re.findall(r'<tr class="limit" data-key="([^"]*)">(.*?)</tr>', page, re.S)
    assert [key for key, _ in rows] == ["&lt;script&gt;alert(&#39;key&#39;)&lt;/script&gt;", "tests.tasks:record"]
    cells = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", rows[0][1], re.S)]
    assert cells[:5] == ["&lt;script&gt;alert(&#39;key&#39;)&lt;/script&gt;", "none", "2", "2", "3"]
    status, page = web.get("/queue?" + urlencode({"queue": "api", "tab": "scheduled"}))
    assert re.findall(r'<td class="kind">(.*?)</td>', page) == [
        '<span class="tag limited" title="held back by its rate_limit: it runs when the start reserved for it is '
        'due">limited</span>']
    status, page = web.get("/queue?" + urlencode({"queue": "plain"}))
    assert status == 200 and 'id="limits"' not in page
    assert snapshot(conn) == before  # looking changes nothing

    many = Queue("many", conn)
    for i in range(queue_page.LIMIT_KEYS + 1):
        admit(many, PyTask(tasks.record, [i], concurrency_limit=1, limit_key=f"customer {i:02}"))
    status, page = web.get("/queue?" + urlencode({"queue": "many"}))
    assert len(re.findall(r'<tr class="limit"', page)) == queue_page.LIMIT_KEYS
    assert re.search(r'<p class="muted more-limits">(.*?)</p>', page).group(1) == (
        "and 1 more key, holding back 0 tasks: <code>delayed stats --json --queue many</code> lists every key read.")


def test_in_a_browser_the_overview_leads_to_the_limits_each_key_holds_back(conn, dashboard, browser):  # noqa: F811
    from selenium.webdriver.common.by import By

    held_queue(conn)
    web = dashboard()
    browser.get(web.base + "/")
    tag = browser.find_element(By.CSS_SELECTOR, 'tr.queue[data-queue="api"] a.tag.limits')
    assert tag.text == "limits: 2 running, 4 held"
    follow(browser, tag)
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "table.limits"), what="the queue's limits")
    assert browser.current_url.endswith("#limits")
    rows = [row.text for row in browser.find_elements(By.CSS_SELECTOR, "table.limits tr.limit")]
    assert rows[0] == "customer <42> none 2 2 3 " + rows[0].rsplit(" ", 1)[-1]
    assert re.fullmatch(r"tests\.tasks:record 2/h 2 1 \d+\.\d s none \S+", rows[1]), rows[1]
    assert browser.find_element(By.CSS_SELECTOR, "#limits h3 .sub").text == (
        "2 keys, 2 running, 3 held for a slot, 1 for their rate")


def test_the_queue_exporter_sums_what_the_limits_hold_per_queue_never_per_key(conn):
    from prometheus_client import CollectorRegistry

    from delayed.ops.metrics.queues import QueueCollector

    held_queue(conn)
    Queue("plain", conn).enqueue(PyTask(tasks.record, ["x"]))
    registry = CollectorRegistry()
    registry.register(QueueCollector(conn, ["api", "plain"]))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in registry.collect() for s in family.samples if "limit" in s.name}
    assert samples == {
        ("delayed_queue_limit_keys", (("queue", "api"),)): 2,
        ("delayed_queue_limit_keys", (("queue", "plain"),)): 0,
        **{("delayed_queue_limit_tasks", (("queue", queue), ("state", state))): count
           for queue, counts in (("api", (2, 3, 1)), ("plain", (0, 0, 0)))
           for state, count in zip(("running", "waiting", "scheduled"), counts)}}


def test_on_a_cluster_stats_reads_each_queue_s_limits_on_its_primary(cluster):
    client = connect(cluster.url)
    for name in ("{orders}", "{mail}"):  # in different slots
        queue = Queue(name, client)
        ids = [queue.keys.worker_ids(1)[0] for _ in range(2)]  # ids whose keep-alive keys are in the queue's slot
        for worker_id in ids:
            client.set(worker_id, 1, ex=600)
        queue.enqueue_many([PyTask(tasks.record, [i], concurrency_limit=1, limit_key="k:{x}") for i in range(2)])
        ops = WorkerOps(queue)
        limit = limit_of(TaskOptions(concurrency_limit=1, limit_key="k:{x}"), "tests.tasks:record")
        assert [ops.admit(worker_id, blob, limit)[0] for worker_id, blob in ops.claim_batch((), ids).tasks] == [
            ADMITTED, WAITING]
    rows = {row["queue"]: row for row in json.loads(delayed(cluster.url, "stats", "--json"))}
    assert {name: [(key["limit_key"], key["running"], key["waiting"]) for key in row["limits"]]
            for name, row in rows.items()} == {"{orders}": [("k:{x}", 1, 1)], "{mail}": [("k:{x}", 1, 1)]}
