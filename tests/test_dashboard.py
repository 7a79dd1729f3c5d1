"""The dashboard (`python -m delayed.dashboard`, `delayed dashboard`): a real waitress server in a
subprocess on a free loopback port, a real redis-server, and a real headless Chromium for the clicks."""
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
from html import unescape
from typing import Dict, Optional, Tuple
from urllib.parse import urlencode

import pytest
import redis

from delayed import GoTask, PyTask, Queue, Worker
from delayed.ops import admin
from delayed.ops.dashboard.charts import chart
from delayed.ops.dashboard.sampler import Sampler, series
from delayed.protocol import inspect
from delayed.protocol.sweeper_ops import SweeperOps
from delayed.protocol.worker_ops import WorkerOps
from delayed.runtime.lifecycle import Lifecycle
from delayed.testing import RedisServer, free_port
from delayed.wire.dead_letter import record
from delayed.wire.keys import LEGACY_PERIODIC_KEY
from delayed.worker.holding import Claim, Holding

from .conftest import ROOT, WAIT, finish, settle_by_a_worker, spawn, wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
GO_WORKER = "0123456789abcdef0123456789abcdef"


class Dashboard:
    """A dashboard process on a free loopback port, and plain HTTP requests to it (no redirects followed)."""

    def __init__(self, url: str, *options: str, command: Tuple[str, ...] = ("-m", "delayed.dashboard")) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, *command, "--redis-url", url, "--port", str(self.port), "--sample-every", "0.3",
             *options], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # it says where it serves once it listens
        assert line.startswith("delayed dashboard on http://127.0.0.1:"), line + self.process.stdout.read()
        self.base = f"http://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, form: Optional[Dict[str, str]] = None,
                headers: Optional[Dict[str, str]] = None) -> Tuple[int, http.client.HTTPMessage, str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT)
        body = urlencode(form) if form is not None else None
        sent = {**({"Content-Type": "application/x-www-form-urlencoded"} if form is not None else {}),
                **(headers or {})}
        connection.request(method, path, body=body, headers=sent)
        reply = connection.getresponse()
        text = reply.read().decode()
        connection.close()
        return reply.status, reply.headers, text

    def get(self, path: str = "/", **headers: str) -> Tuple[int, str]:
        status, _, text = self.request("GET", path, headers=headers)
        return status, text

    def csrf(self) -> str:
        status, page = self.get()
        assert status == 200, page
        return re.search(r'name="csrf" value="([^"]+)"', page).group(1)

    def stop(self) -> None:
        self.process.terminate()
        assert self.process.wait(WAIT) == 0  # a stop is a clean exit


@pytest.fixture
def dashboard(conn, redis_server):
    started = []

    def start(*options: str, url: str = redis_server.url, **kwargs) -> Dashboard:
        started.append(Dashboard(url, *options, **kwargs))
        return started[-1]

    yield start
    for one in started:
        one.stop()


def letter(conn: redis.Redis, queue: str, error: str = "boom", task: Optional[PyTask] = None,
           reason: str = "failed") -> str:
    """A dead letter of queue, as a worker writes it; its id."""
    task = task or PyTask("tests.tasks:record", ["x"])
    fields = record(reason=reason, error=error, blob=task.serialize(), queue=queue, worker=None,
                    func=task.func_path, traceback="Traceback (most recent call last):\n  ValueError: " + error)
    return conn.xadd(f"{queue}_dead_letters", fields).decode()


def snapshot(conn: redis.Redis) -> Dict[bytes, bytes]:
    """Every key's serialized value but the sampler's histories (its thread writes them, not a GET):
    equal snapshots, equal databases."""
    return {key: conn.dump(key) for key in sorted(conn.scan_iter()) if not key.endswith(b"_samples")}


def cells(page: str, queue: str) -> Dict[str, int]:
    """A queue's counts as the overview shows them."""
    row = re.search(r'<tr class="queue" data-queue="%s">(.*?)</tr>' % re.escape(queue), page, re.S).group(1)
    return {name: int(re.sub(r"<[^>]+>", "", value)) for name, value in
            re.findall(r'<td class="(pending|processing|scheduled|dead|workers)">(.*?)</td>', row)}


# The browser

@pytest.fixture
def browser():
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(path)]
    if missing:
        pytest.fail(f"the dashboard's browser tests need Debian's chromium and chromium-driver ({', '.join(missing)} "
                    "missing): apt-get install -y --no-install-recommends chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # with the driver's path given too, selenium looks nothing up
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def test_in_a_browser_requeue_delete_and_purge_dead_letters(conn, dashboard, browser, tmp_path):
    from selenium.webdriver.common.by import By

    queue = Queue("default", conn)
    queue.enqueue(PyTask("tests.tasks:record", ["waiting"]))
    Queue("reports", conn).enqueue(PyTask("tests.tasks:record", ["later"]), delay=3600)
    first = letter(conn, "default", "first failure")
    second = letter(conn, "default", "<script>document.title='owned'</script>")
    third = letter(conn, "default", "third failure")
    web = dashboard(command=("-m", "delayed", "dashboard"))  # as `delayed dashboard`

    def count(name: str, column: str) -> int:
        return int(browser.find_element(By.CSS_SELECTOR, f'tr.queue[data-queue="{name}"] td.{column}').text)

    def click(letter_id: str, button: str) -> None:
        follow(browser, browser.find_element(By.CSS_SELECTOR, f'tr.letter[data-id="{letter_id}"] button.{button}'))

    browser.get(web.base + "/")
    assert (count("default", "pending"), count("default", "dead")) == (1, 3)
    assert count("reports", "scheduled") == 1
    error = browser.find_element(By.CSS_SELECTOR, f'tr.letter[data-id="{second}"] td.error').text
    assert error == "<script>document.title='owned'</script>" and browser.title == "delayed"  # text, not run
    browser.save_screenshot(str(tmp_path / "page.png"))
    assert (tmp_path / "page.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    click(first, "requeue")
    wait_for(lambda: "requeued 1 task into default" in browser.page_source, what="the requeue's message")
    assert (count("default", "pending"), count("default", "dead")) == (2, 2)
    assert conn.llen("default") == 2 and conn.llen("default_noti") == 2
    assert [entry["id"] for entry in queue.dead.list()] == [second, third]

    click(second, "delete")
    wait_for(lambda: "deleted 1 dead letter of default" in browser.page_source, what="the delete's message")
    assert (count("default", "pending"), count("default", "dead")) == (2, 1)
    assert [entry["id"] for entry in queue.dead.list()] == [third]

    follow(browser, browser.find_element(By.CSS_SELECTOR, '.dead-queue[data-queue="default"] a.purge'))
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "button.confirm-purge"), what="the confirm page")
    assert browser.find_element(By.CSS_SELECTOR, "strong.count").text == "1"
    assert queue.dead.count() == 1  # the confirm page itself changes nothing
    follow(browser, browser.find_element(By.CSS_SELECTOR, "button.confirm-purge"))
    wait_for(lambda: "purged 1 dead letter of default" in browser.page_source, what="the purge's message")
    assert count("default", "dead") == 0 and queue.dead.count() == 0
    assert "No dead letters." in browser.find_element(By.ID, "dead").text


def test_screenshot_of_queues_workers_and_a_dead_letter(conn, redis_server, dashboard, browser, busy_worker):
    """The page with three queues (one paused), a worker of ours holding a task, a go-delayed worker holding
    one, a dead letter and some throughput; its screenshot is docs/dashboard.png (see screenshot)."""
    from selenium.webdriver.common.by import By

    web = dashboard("--window", "8", "--sample-every", "0.4")
    reports = Queue("reports", conn)
    conn.hset("go_processing", GO_WORKER, GoTask("main.Resize", {"image": "cat.png", "width": 640}).serialize())
    conn.set(GO_WORKER, "1", ex=60)  # the keep-alive a go-delayed worker keeps
    conn.rpush("go", GoTask("main.Resize", {"image": "dog.png", "width": 320}).serialize())
    conn.rpush("go_noti", "1")
    for burst in (3, 8, 14, 6, 0, 10, 4):
        reports.enqueue_many([PyTask("tests.tasks:record", [f"report {i}"]) for i in range(burst)])
        if burst == 3:
            web.get()  # a page load: the sampler charts the queues it shows from then on
        time.sleep(0.5)
    letter(conn, "reports", "ValueError: the report's month is 13", PyTask("tests.tasks:record", ["2026-13"], retry=3))
    drain = spawn("delayed.worker", "tests.tasks", "--queue", "reports", redis_url=redis_server.url)
    try:
        wait_for(lambda: conn.llen("results") == 45 and not conn.hlen("reports_processing"),
                 what="the reports to drain")
    finally:
        drain.terminate()  # a stop: it goes offline
        drain.communicate(timeout=WAIT)
    reports.enqueue_many([PyTask("tests.tasks:record", [f"report {i}"]) for i in range(5)])
    reports.enqueue(PyTask("tests.tasks:record", ["monthly"]), delay=3600)
    reports.pause()
    conn.hset("reports_periodic", "reports:tests.tasks:record:cron=0 3 * * *", repr(time.time() - 3000))
    time.sleep(1.5)
    browser.get(web.base + "/")
    assert browser.find_element(By.CSS_SELECTOR, "table.holders").text.count("go-delayed") == 1
    assert "main.Resize" in browser.find_element(By.CSS_SELECTOR, "table.holders").text
    assert int(browser.find_element(By.CSS_SELECTOR, 'tr.queue[data-queue="default"] td.workers').text) == 1
    paused = browser.find_element(By.CSS_SELECTOR, 'tr.queue[data-queue="reports"] td.paused').text
    assert paused.split() == ["paused", "resume"]
    reports_chart = browser.find_elements(By.CSS_SELECTOR, 'tr.queue[data-queue="reports"] svg.rate polyline')
    assert reports_chart  # the throughput was sampled and drawn
    screenshot(browser, "dashboard")


def follow(browser, element) -> None:
    """Click element and wait for the page it leads to: a new document, loaded. Until then the old
    page may still answer, or chromedriver may fail on a node of a document going away."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    browser.execute_script("window.delayedOldPage = true")
    element.click()
    WebDriverWait(browser, WAIT, ignored_exceptions=(WebDriverException,)).until(
        lambda driver: driver.execute_script("return !window.delayedOldPage && document.readyState === 'complete'"))


def screenshot(browser, name: str) -> None:
    """The whole page as $DELAYED_DASHBOARD_SCREENSHOTS/name.png, when that directory is given (docs/images/)."""
    directory = os.environ.get("DELAYED_DASHBOARD_SCREENSHOTS")
    if directory:
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                {"width": 1100, "height": height, "deviceScaleFactor": 1, "mobile": False})
        browser.save_screenshot(os.path.join(directory, name + ".png"))
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@pytest.fixture
def busy_worker(conn, redis_server):
    """A worker of ours (a process) holding a slow task of queue "default"; killed after the test."""
    Queue("default", conn).enqueue(PyTask("tests.tasks:slow", ["resize", 60]))
    worker = spawn("delayed.worker", "tests.tasks", "--batch", "1", redis_url=redis_server.url)
    wait_for(lambda: conn.hlen("default_processing"), what="our worker to hold the slow task")
    yield wait_for(lambda: conn.zrange("default_workers", 0, -1), what="our worker to register")[0].decode()
    worker.kill()
    worker.communicate(timeout=WAIT)


# HTTP

def test_a_post_without_or_with_a_wrong_csrf_token_is_refused_and_changes_nothing(conn, dashboard):
    letter_id = letter(conn, "default")
    web = dashboard()
    before = snapshot(conn)
    for form in ({"queue": "default", "id": letter_id}, {"queue": "default", "id": letter_id, "csrf": "wrong"},
                 {"queue": "default", "id": letter_id, "csrf": ""}):
        for path in ("/dead/requeue", "/dead/delete"):
            status, _, text = web.request("POST", path, form)
            assert status == 403 and "CSRF" in text and "Nothing was changed" in text
        status, _, _ = web.request("POST", "/dead/purge", {**form, "confirm": "yes"})
        assert status == 403
    assert snapshot(conn) == before
    status, headers, _ = web.request("POST", "/dead/requeue", {"queue": "default", "id": letter_id, "csrf": web.csrf()})
    assert status == 303 and conn.llen("default") == 1 and conn.xlen("default_dead_letters") == 0  # the right one


def test_with_a_token_every_request_must_carry_it(conn, dashboard):
    letter_id = letter(conn, "default")
    web = dashboard("--token", "s3cret-token")
    for path in ("/", "/static/dashboard.css", "/dead?queue=default", "/?token=wrong"):
        status, text = web.get(path)
        assert status == 401 and "Unauthorized" in text and letter_id not in text
    assert web.get("/", Authorization="Bearer wrong")[0] == 401
    assert web.get("/", Cookie="delayed_dashboard_token=wrong")[0] == 401
    status, _, _ = web.request("POST", "/dead/delete", {"queue": "default", "id": letter_id})
    assert status == 401 and conn.xlen("default_dead_letters") == 1
    assert web.get("/", Authorization="Bearer s3cret-token")[0] == 200
    status, headers, _ = web.request("GET", "/dead?queue=default&token=s3cret-token")
    assert status == 303 and headers["Location"] == "/dead?queue=default"  # the token leaves the URL
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    jar = cookie.split(";")[0]
    status, page = web.get("/", Cookie=jar)
    assert status == 200 and letter_id in page
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    status, _, _ = web.request("POST", "/dead/delete", {"queue": "default", "id": letter_id}, {"Cookie": jar})
    assert status == 403 and conn.xlen("default_dead_letters") == 1  # the token is not a CSRF token
    status, _, _ = web.request("POST", "/dead/delete", {"queue": "default", "id": letter_id, "csrf": csrf},
                               {"Cookie": jar})
    assert status == 303 and conn.xlen("default_dead_letters") == 0


def test_without_a_token_it_answers_only_to_a_loopback_host_name(conn, dashboard):
    web = dashboard()
    assert web.get("/", Host="localhost:%d" % web.port)[0] == 200
    status, text = web.get("/", Host="attacker.example:%d" % web.port)  # a page reaching it by DNS rebinding
    assert status == 403 and "loopback" in text


@pytest.mark.parametrize("command", [("-m", "delayed.dashboard"), ("-m", "delayed", "dashboard")])
def test_serving_beyond_loopback_without_a_token_exits_2_with_one_line(redis_server, command):
    port = free_port()
    done = subprocess.run([sys.executable, *command, "--redis-url", redis_server.url, "--host", "0.0.0.0",
                           "--port", str(port)], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        "delayed.dashboard: refusing to serve on 0.0.0.0 without --token"), done.stderr


def test_gets_never_change_redis(conn, dashboard):
    queue = Queue("default", conn)
    queue.enqueue(PyTask("tests.tasks:record", ["a"]))
    queue.enqueue(PyTask("tests.tasks:record", ["b"]), delay=600)
    letter_id = letter(conn, "default")
    conn.rpush("default_dead", json.dumps({"reason": "failed", "error": "old", "task": "kg=="}))  # an older version's
    conn.hset("default_periodic", "default:tick", "1700000000")
    web = dashboard()
    wait_for(lambda: "net_per_s" in web.get()[1], what="a throughput sample")
    before = snapshot(conn)
    page = web.get()[1]
    assert cells(page, "default")["dead"] == 2 and "still in the list default_dead" in page
    for path in ("/", "/?refresh=5", "/dead?queue=default", f"/dead?queue=default&after={letter_id}",
                 f"/dead/show?queue=default&id={letter_id}", "/dead/purge?queue=default", "/dead/show?queue=default&id=1-0",
                 "/dead/purge?queue=default&reason=failed&func=tests.tasks:record&back=tab",
                 "/dead/requeue?queue=default&id=" + letter_id, "/dead/delete?queue=default&id=" + letter_id,
                 "/dead/purge?queue=default&confirm=yes", "/static/dashboard.css",
                 *(f"/queue?queue=default&tab={tab}" for tab in ("pending", "processing", "scheduled", "dead")),
                 "/task?id=" + "0" * 32, "/scheduled/run?queue=default&ref=x", "/task/cancel?queue=default&id=x"):
        status, _ = web.get(path)
        assert status in (200, 404, 405), path
    assert web.get("/dead/requeue?queue=default&id=" + letter_id)[0] == 405  # actions are POSTs only
    assert snapshot(conn) == before
    status, _, _ = web.request("POST", "/dead/delete", {"queue": "default", "id": letter_id, "csrf": web.csrf()})
    assert status == 303 and not conn.exists("default_dead")  # a change moves the old list into the stream
    page = web.get()[1]
    assert "old" in re.search(r'<table class="letters">(.*?)</table>', page, re.S).group(1)
    assert "still in the list" not in page


def test_html_in_tasks_errors_and_queue_names_is_shown_as_text(conn, dashboard):
    evil = PyTask("tests.tasks:record", ["<img src=x onerror=alert(1)>"], {"k": "</code><b>bold</b>"})
    letter_id = letter(conn, "q<script>", "<script>alert('error')</script>", evil)
    conn.hset("q<script>_processing", GO_WORKER, evil.serialize())
    conn.set(GO_WORKER, "1", ex=60)
    web = dashboard()
    for path in ("/", "/dead?" + urlencode({"queue": "q<script>"}),
                 "/dead/show?" + urlencode({"queue": "q<script>", "id": letter_id}),
                 "/queue?" + urlencode({"queue": "q<script>", "tab": "dead"})):
        status, headers, page = web.request("GET", path)
        assert status == 200
        assert "<script" not in page and "<img" not in page and "<b>" not in page, path
        assert "&lt;script&gt;alert(&#39;error&#39;)&lt;/script&gt;" in page, path
        assert "q&lt;script&gt;" in page
        assert "default-src 'none'" in headers["Content-Security-Policy"]
    status, page = web.get("/queue?" + urlencode({"queue": "q<script>", "tab": "processing"}))
    assert status == 200 and "<img" not in page and "onerror=alert(1)" in page
    status, page = web.get("/dead/show?" + urlencode({"queue": "q<script>", "id": letter_id}))
    assert "ValueError: &lt;script&gt;" in page  # the traceback, escaped too
    assert unescape(re.search(r'<pre class="json">(.*?)</pre>', page, re.S).group(1)).count("onerror") == 1


def test_a_missing_letter_is_a_clear_message(conn, dashboard):
    letter_id = letter(conn, "default")
    web = dashboard()
    status, page = web.get("/dead/show?queue=default&id=1-0")
    assert status == 404 and "no dead letter 1-0" in page
    status, page = web.get("/dead/show?queue=default&id=nonsense")
    assert status == 404 and "not a dead letter id: nonsense" in page
    status, page = web.get("/dead/show?id=1-0")
    assert status == 400 and "Say which queue" in page
    status, page = web.get("/dead?queue=default_noti")
    assert status == 400 and "queue name &#39;default_noti&#39; is a key of queue &#39;default&#39;" in page, page
    before = snapshot(conn)
    status, headers, _ = web.request("POST", "/dead/requeue", {"queue": "default", "id": "1-0", "csrf": web.csrf()})
    assert status == 303
    page = web.get("/", Cookie=headers["Set-Cookie"].split(";")[0])[1]  # the flashed message rides the session
    assert 'class="flash error"' in page and "1-0: no such dead letter (nothing was changed)" in page, page
    assert snapshot(conn) == before and letter_id in page


def test_an_id_that_is_not_a_stream_id_is_a_404_or_a_flashed_error_not_a_500(conn, dashboard):
    letter_id = letter(conn, "default")
    web = dashboard()
    before = snapshot(conn)
    for bad in ("1-0\n", "\u0661-\u0660", "18446744073709551616-0", "0-99999999999999999999"):
        for path, name in (("/dead/show", "id"), ("/dead", "after")):
            status, page = web.get(f"{path}?{urlencode({'queue': 'default', name: bad})}")
            assert status == 404 and "not a dead letter id" in page, (path, bad, page)
        for path in ("/dead/requeue", "/dead/delete"):
            status, headers, _ = web.request("POST", path, {"queue": "default", "id": bad, "csrf": web.csrf()})
            assert status == 303
            page = web.get("/", Cookie=headers["Set-Cookie"].split(";")[0])[1]
            assert 'class="flash error"' in page and "not a dead letter id" in page, (path, bad)
    assert snapshot(conn) == before and letter_id in web.get()[1]


def test_an_unreachable_redis_is_a_page_saying_so_and_it_recovers(conn, tmp_path, dashboard):
    server = RedisServer(tmp_path).start()
    try:
        Queue("default", redis.Redis.from_url(server.url)).enqueue(PyTask("tests.tasks:record", ["a"]))
        web = dashboard(url=server.url)
        assert cells(web.get()[1], "default")["pending"] == 1
        server.stop()
        for path in ("/", "/dead?queue=default", "/dead/show?queue=default&id=1-0"):
            status, page = web.get(path)
            assert status == 503 and "cannot reach Redis" in page and "Traceback" not in page
            assert ".." not in page.replace("...", ""), page  # one full stop after redis-py's message, not two
        server.start()  # the same port, empty
        status, page = web.get()
        assert status == 200 and "No queue has keys" in page
    finally:
        server.stop()


def test_a_refused_password_is_a_page_saying_refused_not_unreachable(tmp_path, dashboard):
    with RedisServer(tmp_path, ["--requirepass", "s3cret"]) as server:
        web = dashboard(url=f"redis://:s3cret@127.0.0.1:{server.port}/0")
        assert web.get()[0] == 200
        client = redis.Redis(port=server.port, password="s3cret")
        client.config_set("requirepass", "new")  # the dashboard's next connection is refused
        client.client_kill_filter(_type="normal", skipme=True)
        client.close()
        status, page = web.get()
        assert status == 503 and "Redis refused the dashboard&#39;s credentials: " in page, page
        assert "invalid username-password pair" in page and "cannot reach" not in page and "s3cret" not in page


def test_the_overview_shows_counts_workers_go_delayeds_holders_scheduled_and_periodic(conn, dashboard, busy_worker):
    ours = busy_worker
    conn.hset("go_processing", GO_WORKER, GoTask("main.Resize", 640).serialize())
    conn.set(GO_WORKER, "1", ex=60)
    lapsed = "fedcba9876543210fedcba9876543210"  # its keep-alive is gone: a sweeper will requeue its task
    conn.hset("go_processing", lapsed, GoTask("main.Lost", 1).serialize())
    Queue("go", conn).enqueue(GoTask("main.Resize", 320), delay=600)
    conn.hset(LEGACY_PERIODIC_KEY, "go:main.Report", "1732280000")  # as older versions kept it
    web = dashboard()
    page = web.get()[1]
    assert cells(page, "default") == {"pending": 0, "processing": 1, "scheduled": 0, "dead": 0, "workers": 1}
    assert cells(page, "go") == {"pending": 0, "processing": 2, "scheduled": 1, "dead": 0, "workers": 1}  # GO_WORKER
    assert ours in re.search(r'<table class="workers">(.*?)</table>', page, re.S).group(1)
    holders = re.search(r'<table class="holders">(.*?)</table>', page, re.S).group(1)
    assert GO_WORKER in holders and "main.Resize(640)" in holders and "tests.tasks:slow" in holders
    assert lapsed not in holders and "main.Lost" not in holders
    assert "main.Resize(320)" in page and "2024-11-22T12:53:20+00:00" in page
    rows = admin.holders(conn, ["default", "go"])
    assert [(row["queue"], row["go"]) for row in rows] == [("default", False), ("go", True)]
    assert admin.periodic(conn, ["default", "go"]) == [{"queue": None, "name": "go:main.Report",
                                                        "last_tick": "2024-11-22T12:53:20+00:00"}]


def test_in_a_browser_the_processing_tab_says_when_a_task_was_claimed_and_the_workers_their_host_and_pid(
        conn, redis_server, dashboard, browser):
    from selenium.webdriver.common.by import By

    Queue("default", conn).enqueue(PyTask("tests.tasks:slow", ["resize", 60]))
    worker = spawn("delayed.worker", "tests.tasks", "--batch", "1", redis_url=redis_server.url)
    conn.hset("default_processing", GO_WORKER, GoTask("main.Resize", 640).serialize())
    conn.set(GO_WORKER, "1", ex=60)
    try:
        ours = wait_for(lambda: conn.zrange("default_workers", 0, -1), what="our worker online")[0].decode()
        wait_for(lambda: conn.exists("started:resize"), what="the slow task to start")
        web = dashboard()

        def held() -> Dict[str, Tuple[str, str]]:
            browser.get(web.base + "/queue?queue=default&tab=processing")
            return {row.find_element(By.CSS_SELECTOR, "code").text: (
                row.find_element(By.CSS_SELECTOR, "td.claimed").text, row.find_element(By.CSS_SELECTOR, "td.running").text)
                for row in browser.find_elements(By.CSS_SELECTOR, "table.holders tr.held")}

        rows = wait_for(lambda: (shown := held()) and shown[ours][0] != "not noted" and shown, what="the claim noted")
        claimed, running = rows[ours]
        assert claimed.endswith("+00:00") and running.endswith(" s") and float(running[:-2]) >= 1
        assert rows[GO_WORKER] == ("unknown", "–")
        screenshot(browser, "dashboard-processing")
        browser.get(web.base + "/")
        cells = {row.find_element(By.CSS_SELECTOR, "code").text: [cell.text for cell in row.find_elements(
            By.CSS_SELECTOR, "td.host, td.pid, td.since")] for row in browser.find_elements(By.CSS_SELECTOR, "tr.worker")}
        assert cells[ours][:2] == [socket.gethostname(), str(worker.pid)] and cells[ours][2].endswith("+00:00")
        assert cells[GO_WORKER] == ["unknown", "unknown", "unknown"]
        overview = {row.find_element(By.CSS_SELECTOR, "code").text: row.find_element(By.CSS_SELECTOR, "td.claimed").text
                    for row in browser.find_elements(By.CSS_SELECTOR, "table.holders tr.held")}
        assert overview[ours].endswith("+00:00") and overview[GO_WORKER] == "unknown"
    finally:
        worker.kill()
        worker.communicate(timeout=10)


def test_in_a_browser_the_latency_column_is_measured_for_a_tracked_head_and_estimated_otherwise(
        conn, dashboard, browser):
    from selenium.webdriver.common.by import By

    waiting = Queue("t", conn).enqueue(PyTask("tests.tasks:record", ["tracked"]), result_ttl=60)
    conn.hset(f"t_task:{waiting.id}", "enqueued", float("%d.%06d" % conn.time()) - 120)
    draining = Queue("u", conn)
    draining.enqueue_many(PyTask("tests.tasks:record", [i]) for i in range(1000))
    Queue("empty", conn).enqueue(PyTask("tests.tasks:record", ["gone"]))
    conn.delete("empty")
    swept = Queue("s", conn)
    swept.enqueue(PyTask("tests.tasks:record", ["untracked"]))
    SweeperOps(swept).sweep()  # notes since when the head of s stands there
    digest, _, since_ms = conn.get("s_head_since").partition(b":")
    conn.set("s_head_since", digest + b":" + str(int(since_ms) - 60_000).encode())  # as if a minute ago
    web = dashboard()

    def latency(name: str) -> str:
        return browser.find_element(By.CSS_SELECTOR, f'tr.queue[data-queue="{name}"] td.latency').text

    browser.get(web.base + "/")
    assert browser.find_element(By.CSS_SELECTOR, "table.queues th:nth-child(8)").text == "latency"
    measured = latency("t")
    waited = float("%d.%06d" % conn.time()) - float(conn.hget(f"t_task:{waiting.id}", "enqueued"))
    assert measured.endswith(" s") and 120 <= float(measured[:-2]) <= round(waited, 1) + 0.1
    assert latency("empty") == "0.0 s" and latency("u") == "?"  # no rate out yet, no sweep: unknown, said so
    assert "no sweep has seen it" in browser.find_element(
        By.CSS_SELECTOR, 'tr.queue[data-queue="u"] td.latency span').get_attribute("title")
    lower_bound = latency("s")
    seen = float("%d.%06d" % conn.time()) - (int(since_ms) - 60_000) / 1000  # the most the marker can say now
    assert lower_bound.startswith("~") and lower_bound.endswith(" s")
    assert 60 <= float(lower_bound[1:-2]) <= round(seen, 1) + 0.1
    assert "a lower bound" in browser.find_element(
        By.CSS_SELECTOR, 'tr.queue[data-queue="s"] td.latency span').get_attribute("title")
    worker_ops, ids = WorkerOps(draining), [f"delayed-py-{i:032x}" for i in range(10)]
    held: Tuple[str, ...] = ()

    def estimated() -> bool:
        nonlocal held
        worker_ops.claim_batch(held, ids)  # release the last ten, take ten more: tasks leave u
        held = tuple(ids)
        browser.get(web.base + "/")
        return latency("u").startswith("~")

    wait_for(estimated, what="an estimated latency for u", interval=0.1)
    assert latency("u").endswith(" s") and float(latency("u")[1:-2]) > 0


def test_in_a_browser_the_overview_warns_about_a_queue_whose_dead_workers_tasks_nothing_sweeps(
        conn, redis_server, dashboard, browser):
    from selenium.webdriver.common.by import By

    conn.hset("t7c_processing", "delayed-py-" + "d" * 32, PyTask("tests.tasks:record", ["lost"]).serialize())
    conn.hset("go_processing", GO_WORKER, GoTask("main.Resize", 1).serialize())
    conn.set(GO_WORKER, "1", ex=60)  # alive: its task is not lost
    web = dashboard()

    def warnings() -> Dict[str, str]:
        browser.get(web.base + "/")
        return {element.get_attribute("data-queue"): element.text
                for element in browser.find_elements(By.CSS_SELECTOR, "#queues p.warning.unswept")}

    assert warnings() == {"t7c": "queue 't7c': 1 task of dead workers waits for a sweep, and no sweep is recorded: "
                                 "start a worker of ours on it (workers sweep the queues they serve), or "
                                 "python -m delayed.sweeper"}
    status, output = finish(spawn("delayed.worker", "--queue", "t7c", "--burst", "tests.tasks",
                                  redis_url=redis_server.url), timeout=60)
    assert status == 0 and conn.hlen("t7c_processing") == 0, output  # it swept the queue, and ran the task
    assert warnings() == {}


# Throughput

def test_throughput_is_the_change_of_counts_per_second_between_samples_kept_in_redis(conn):
    # Samplers every minute, whose lines break only after 150 s without a sample, however slow the
    # machine; and, over the same history, samplers every 0.1 s to see a gap and a stale sample.
    queue = Queue("q", conn)
    sampler = Sampler(conn, ["q"], every=60, window=600)
    assert sampler.sample() is True  # a queue sampled for the first time: sample again soon
    assert series(sampler.history(["q"])) == {}  # one sample makes no rate
    queue.enqueue_many([PyTask("tests.tasks:record", [i]) for i in range(50)])
    letter(conn, "q")
    time.sleep(0.02)  # samples in the same millisecond (the stream ids' resolution) make no rate
    assert sampler.sample() is False
    rates = series(sampler.history(["q"]))["q"]
    assert list(rates) == ["in_per_s", "out_per_s", "net_per_s", "dead_per_s"]
    assert [len(points) for points in rates.values()] == [2, 2, 2, 2] and rates["net_per_s"][0][1] is None
    assert rates["in_per_s"][-1][1] > 0 and rates["out_per_s"][-1][1] == 0  # 50 in; the letter was by hand
    assert rates["net_per_s"][-1][1] > 0 and rates["dead_per_s"][-1][1] > 0
    sampler.conn = redis.Redis(port=free_port(), socket_connect_timeout=0.5)  # Redis gone: no sample, a gap
    assert sampler.sample() is False
    sampler.conn = conn
    quick = Sampler(conn, ["q"], every=0.1, window=600)
    time.sleep(0.3)
    quick.sample()
    assert series(quick.history(["q"]))["q"]["net_per_s"][-1][1] is None  # the line breaks after the gap
    time.sleep(0.02)
    sampler.sample()
    history = sampler.history(["q"])
    assert series(history)["q"]["net_per_s"][-1][1] == 0
    restarted = Sampler(conn, ["q"], every=60, window=600)  # a new dashboard process: the same history
    assert restarted.history(["q"]) == history
    assert restarted.latest(history) == [history["q"][-1]]  # what the latency is estimated from
    time.sleep(0.3)
    assert quick.latest(history) == []  # older than 2.5 periods: it says nothing of now
    bounded = Sampler(conn, ["q"], every=1, window=10)
    for _ in range(20):
        bounded.sample()
    assert conn.xlen("q_samples") == bounded.keep == 11 and 0 < conn.ttl("q_samples") <= 21  # bounded


def test_a_chart_has_axes_in_tasks_per_second_and_time_ago_and_breaks_at_gaps():
    drawn = chart([(990.0, 1.0), (995.0, -2.0), (996.0, None), (1000.0, 2.0), (500.0, 9.0)], end=1000.0,
                  window=10.0)
    assert [label for _, label in drawn["y_ticks"]] == ["-2", "0", "2"]
    assert [label for _, label in drawn["x_ticks"]] == ["-10 s", "-5 s", "now"]
    assert len(drawn["lines"]) == 2 and drawn["latest"] == 2.0  # the point outside the window is left out
    assert [label for _, label in chart([], 1000.0, 600.0)["x_ticks"]] == ["-10 min", "-5 min", "now"]


def test_in_a_browser_a_new_busy_queue_is_charted_within_a_sample_period_and_after_a_restart(
        conn, dashboard, browser):
    from selenium.webdriver.common.by import By

    web = dashboard("--sample-every", "600")  # the next sample after the first is ten minutes away
    browser.get(web.base + "/")
    fresh = Queue("fresh", conn)
    fresh.enqueue_many([PyTask("tests.tasks:record", [i]) for i in range(100)])

    def charted() -> list:
        browser.get(web.base + "/")
        return browser.find_elements(By.CSS_SELECTOR, 'tr.queue[data-queue="fresh"] figure.chart')

    # sampled as the page finds it and again a second later: well within one period, not two or more
    figures = wait_for(charted, interval=0.2, what="a chart of the new queue")
    first = figures[0]
    assert first.get_attribute("data-field") == "in_per_s" and "tasks/s" in first.text
    ticks = [tick.text for tick in first.find_elements(By.CSS_SELECTOR, "text.x-tick")]
    assert ticks == ["-10 min", "-5 min", "now"]
    assert len(first.find_elements(By.CSS_SELECTOR, "text.y-tick")) >= 2
    assert first.find_elements(By.CSS_SELECTOR, "polyline")
    web.stop()
    again = dashboard("--sample-every", "600")
    browser.get(again.base + "/")  # the first page of a new process: the history was kept in Redis
    assert browser.find_elements(By.CSS_SELECTOR, 'tr.queue[data-queue="fresh"] figure.chart polyline')
    assert "collecting" not in browser.find_element(By.CSS_SELECTOR, 'tr.queue[data-queue="fresh"]').text


# Without the extra

def test_without_flask_delayed_imports_and_the_dashboard_says_what_to_install(redis_server):
    code = ("import sys; sys.modules['flask'] = sys.modules['waitress'] = None; "
            "import importlib.util; real = importlib.util.find_spec; "
            "importlib.util.find_spec = lambda name, *a: None if name in ('flask', 'waitress') else real(name, *a); "
            "import delayed, delayed.__main__, delayed.dashboard; "
            f"sys.exit(delayed.__main__.main(['dashboard', '--redis-url', {redis_server.url!r}]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stderr == (
        "delayed.dashboard: the dashboard needs flask and waitress: pip install 'delayed[dashboard]'\n"), done.stderr


def test_dead_letters_page_by_id(conn, dashboard):
    ids = [letter(conn, "default", f"failure {i}") for i in range(25)]
    web = dashboard()
    page = web.get()[1]
    listed = re.findall(r'<tr class="letter" data-id="([^"]+)"', page)
    assert listed == ids[:20]
    more = unescape(re.search(r'<a href="([^"]+)">more…</a>', page).group(1))
    assert more == f"/dead?queue=default&after={ids[19]}"
    status, rest = web.get(more)
    assert status == 200 and re.findall(r'<tr class="letter" data-id="([^"]+)"', rest) == ids[20:]
    assert "next page" not in rest
    status, detail = web.get(f"/dead/show?queue=default&id={ids[3]}")
    assert status == 200 and "failure 3" in detail and "ValueError: failure 3" in detail


def test_a_queue_is_paused_and_resumed_from_the_overview(conn, dashboard):
    """The pause column shows the queue's state; its button POSTs (with the CSRF token) what
    `delayed pause` / `resume` do, and our workers' claim scripts then see the N_paused key."""
    queue = Queue("default", conn)
    queue.enqueue(PyTask("tests.tasks:record", ["waiting"]))
    web = dashboard()
    status, page = web.get()
    assert status == 200 and 'class="pause"' in page and "tag paused" not in page
    status, _, _ = web.request("POST", "/queue/pause", {"queue": "default", "paused": "yes"})
    assert status == 403 and queue.paused_since() is None  # no CSRF token: nothing changed
    status, headers, _ = web.request("POST", "/queue/pause", {"queue": "default", "paused": "yes",
                                                               "csrf": web.csrf()})
    assert status == 303 and headers["Location"].endswith("#queues")
    assert queue.paused_since() is not None and WorkerOps(queue).claim_batch([], ["w-1"]).tasks == []
    status, page = web.get()
    assert '<span class="tag paused">paused</span>' in page and 'class="resume"' in page
    web.request("POST", "/queue/pause", {"queue": "default", "paused": "no", "csrf": web.csrf()})
    assert queue.paused_since() is None and cells(web.get()[1], "default")["pending"] == 1


# Tracked tasks

def test_in_a_browser_a_tracked_task_is_found_by_id_and_cancelled_while_it_waits(conn, redis_server, dashboard,
                                                                                 browser):
    from selenium.webdriver.common.by import By

    jobs, waiting = Queue("jobs", conn), Queue("waiting", conn)
    done = jobs.enqueue(PyTask("tests.tasks:add", [1, 2]), result_ttl=600)
    failed = jobs.enqueue(PyTask("tests.tasks:always_fail", ["<b>no</b>"]), result_ttl=600)
    worker = spawn("delayed.worker", "tests.tasks", "--queue", "jobs", redis_url=redis_server.url)
    try:
        assert done.result(timeout=WAIT) == 3
        wait_for(lambda: failed.status() == "failed", what="the failing task to fail")
    finally:
        worker.terminate()
        worker.communicate(timeout=WAIT)
    pending = waiting.enqueue(PyTask("tests.tasks:record", ["later"]), result_ttl=600)
    web = dashboard()

    def find(task_id: str) -> None:
        browser.get(web.base + "/")
        box = browser.find_element(By.CSS_SELECTOR, "header form.find-task input[name=id]")
        box.send_keys(task_id)
        follow(browser, browser.find_element(By.CSS_SELECTOR, "header form.find-task button"))
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "h2 code"), what="the task's page")

    def shown(name: str) -> str:
        return browser.find_element(By.CSS_SELECTOR, f"dd.{name}").text

    find(done.id)
    assert browser.find_element(By.CSS_SELECTOR, "span.status").text == "done"
    assert (shown("func"), shown("attempts")) == ("tests.tasks:add", "1")
    assert shown("finished_at").endswith("+00:00") and shown("worker").startswith("delayed-py-")
    assert json.loads(browser.find_element(By.CSS_SELECTOR, "pre.result").text) == 3
    assert not browser.find_elements(By.CSS_SELECTOR, "button.cancel")  # it ended: nothing to cancel

    find(failed.id)
    assert browser.find_element(By.CSS_SELECTOR, "span.status").text == "failed"
    assert shown("error") == "ValueError: <b>no</b> always fails"  # text, not markup
    assert shown("letter") == jobs.dead.list()[0]["id"]

    find(pending.id)
    assert browser.find_element(By.CSS_SELECTOR, "span.status").text == "pending"
    assert "waiting" in browser.find_element(By.CSS_SELECTOR, "h2").text
    follow(browser, browser.find_element(By.CSS_SELECTOR, "button.cancel"))
    wait_for(lambda: f"cancelled task {pending.id} (pending) in waiting" in browser.page_source,
             what="the cancel's message")
    assert browser.find_element(By.CSS_SELECTOR, "span.status").text == "cancelled"
    assert not browser.find_elements(By.CSS_SELECTOR, "button.cancel")
    assert conn.llen("waiting") == 0 and conn.llen("waiting_noti") == 0 and pending.status() == "cancelled"


def test_in_a_browser_a_failed_task_s_page_shows_its_arguments_traceback_and_a_link_to_its_letter(
        conn, redis_server, dashboard, browser):
    from selenium.webdriver.common.by import By

    jobs = Queue("jobs", conn)
    failed = jobs.enqueue(PyTask("tests.tasks:always_fail", [], {"tag": "report 2026-13"}), result_ttl=600)
    done = jobs.enqueue(PyTask("tests.tasks:add", [1, 2]), result_ttl=600)
    run = spawn("delayed.worker", "tests.tasks", "--queue", "jobs", "--burst", redis_url=redis_server.url)
    assert run.wait(30) == 0
    web = dashboard()

    def page(task_id: str) -> None:
        browser.get(web.base + "/task?id=" + task_id)

    page(failed.id)
    assert browser.find_element(By.CSS_SELECTOR, "span.status").text == "failed"
    arguments = browser.find_element(By.CSS_SELECTOR, "dd.arguments")
    assert arguments.find_element(By.CSS_SELECTOR, "code.task").text == (
        'tests.tasks:always_fail([], **{"tag": "report 2026-13"})')
    assert json.loads(arguments.find_element(By.CSS_SELECTOR, "pre.json").text)["kwargs"] == {"tag": "report 2026-13"}
    traceback = browser.find_element(By.CSS_SELECTOR, "pre.traceback").text
    assert traceback.startswith("Traceback (most recent call last):") and "always fails" in traceback
    [letter] = jobs.dead.list()
    link = browser.find_element(By.CSS_SELECTOR, "dd.letter a.letter-link")
    assert link.text == letter["id"]
    screenshot(browser, "dashboard-task")
    follow(browser, link)
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "dl.letter-detail"), what="the letter's page")
    assert letter["id"] in browser.find_element(By.CSS_SELECTOR, "h2").text

    page(done.id)
    assert browser.find_element(By.CSS_SELECTOR, "dd.arguments code.task").text == "tests.tasks:add([1, 2])"
    assert not browser.find_elements(By.CSS_SELECTOR, "dd.letter, pre.traceback")

    jobs.dead.requeue([letter["id"]])  # the letter goes; the record still names it until the task runs again
    page(failed.id)
    assert "no longer among the dead letters" in browser.find_element(By.CSS_SELECTOR, "dd.letter").text
    assert not browser.find_elements(By.CSS_SELECTOR, "dd.letter a, pre.traceback")
    assert "always_fail" in browser.find_element(By.CSS_SELECTOR, "dd.arguments").text


def test_an_unknown_task_id_is_a_404_saying_so_and_glob_characters_match_only_themselves(conn, dashboard):
    handle = Queue("jobs", conn).enqueue(PyTask("tests.tasks:record", ["x"]), result_ttl=600)
    conn.set("jobs_task:" + "f" * 32, "a string, not a record")
    web = dashboard()
    for task_id in ("0" * 32, "*", handle.id[:-1] + "?", handle.id[:5] + "*", "[0-9a-f]*", "\\*", "f" * 32):
        status, page = web.get("/task?" + urlencode({"id": task_id}))
        assert status == 404 and "There is no tracked task" in page and handle.id not in page, task_id
    assert web.get("/task?id=")[0] == 400
    status, page = web.get("/task?id=" + handle.id)
    assert status == 200 and 'class="status">pending<' in page
    conn.hset("other_task:" + handle.id, "status", "done")  # the same id on two queues: the first by name
    assert inspect.task_queues(conn, handle.id) == ["jobs", "other"] and inspect.task_queues(conn, "") == []
    assert web.get("/task?id=" + handle.id)[0] == 200


def test_cancel_is_a_post_with_the_csrf_token(conn, dashboard):
    queue = Queue("jobs", conn)
    handle = queue.enqueue(PyTask("tests.tasks:record", ["x"]), result_ttl=600)
    web = dashboard()
    before = snapshot(conn)
    for form in ({"queue": "jobs", "id": handle.id}, {"queue": "jobs", "id": handle.id, "csrf": "wrong"}):
        status, _, text = web.request("POST", "/task/cancel", form)
        assert status == 403 and "Nothing was changed" in text
    assert web.get(f"/task/cancel?queue=jobs&id={handle.id}")[0] == 405
    assert web.get(f"/task?id={handle.id}")[0] == 200
    assert snapshot(conn) == before
    status, headers, _ = web.request("POST", "/task/cancel", {"queue": "jobs", "id": "0" * 32, "csrf": web.csrf()})
    assert status == 303 and headers["Location"] == "/task?id=" + "0" * 32
    status, headers, _ = web.request("POST", "/task/cancel", {"queue": "jobs", "id": handle.id, "csrf": web.csrf()})
    assert status == 303 and handle.status() == "cancelled"
    page = web.get(headers["Location"], Cookie=headers["Set-Cookie"].split(";")[0])[1]
    assert f"cancelled task {handle.id} (pending) in jobs" in page


def test_a_running_task_s_page_has_a_cancel_button_that_requests_its_cancel(conn, dashboard):
    queue = Queue("jobs", conn)
    handle = queue.enqueue(PyTask("tests.tasks:record", ["x"]), result_ttl=600)
    worker_id = "delayed-py-" + "7" * 32
    WorkerOps(queue).claim_batch((), (worker_id,))
    web = dashboard()
    assert 'button class="cancel danger"' in web.get(f"/task?id={handle.id}")[1]
    status, headers, _ = web.request("POST", "/task/cancel", {"queue": "jobs", "id": handle.id, "csrf": web.csrf()})
    assert status == 303 and handle.status() == "running"
    page = web.get(headers["Location"], Cookie=headers["Set-Cookie"].split(";")[0])[1]
    assert f"cancel requested: task {handle.id} is running on worker {worker_id}; it ends cancelled" in page
    assert 'class="cancel_requested_at"' in page


# A queue's page

def test_in_a_browser_a_queue_s_page_shows_pending_processing_scheduled_and_dead_tasks(conn, dashboard, browser):
    from selenium.webdriver.common.by import By

    jobs = Queue("jobs", conn, max_task_size=3_000_000)
    jobs.enqueue(PyTask("tests.tasks:record", ["x" * 2_000_000]))  # a preview of its head, not 2 MB
    jobs.enqueue_many([PyTask("tests.tasks:record", [i]) for i in range(54)])
    jobs.enqueue_many([GoTask("main.Resize", i) for i in range(5)])
    jobs.enqueue(PyTask("tests.tasks:record", ["later"]), delay=3600)
    conn.hset("jobs_processing", GO_WORKER, GoTask("main.Resize", 640).serialize())
    conn.set(GO_WORKER, "1", ex=60)
    failed = letter(conn, "jobs", "first", PyTask("tests.tasks:always_fail", ["a"]))
    other = letter(conn, "jobs", "second", PyTask("tests.tasks:record", ["b"]))
    web = dashboard()

    def rows(css: str) -> list:
        return [row.text for row in browser.find_elements(By.CSS_SELECTOR, css)]

    browser.get(web.base + "/")
    follow(browser, browser.find_element(By.CSS_SELECTOR, 'tr.queue[data-queue="jobs"] td.name a'))
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "nav.tabs"), what="the queue's page")
    assert browser.find_element(By.CSS_SELECTOR, "a.tab.current").text == "pending 60"
    assert rows("table.summary tbody tr") == ["tests.tasks:record 55", "main.Resize Go 5"]
    listed = rows("table.pending tr.task")
    assert len(listed) == 50 and listed[1] == "1 tests.tasks:record([0])"
    assert listed[0].startswith("0 tests.tasks:record(") and "(the first 64 KiB of 2000026 bytes)" in listed[0]
    assert len(browser.page_source) < 200_000
    screenshot(browser, "dashboard-queue")
    follow(browser, browser.find_element(By.CSS_SELECTOR, "a.next"))
    wait_for(lambda: len(rows("table.pending tr.task")) == 10, what="the second page")
    assert rows("table.pending tr.task")[-1] == "59 main.Resize(4) Go"
    assert browser.find_elements(By.CSS_SELECTOR, "a.previous") and not browser.find_elements(By.CSS_SELECTOR, "a.next")

    follow(browser, browser.find_element(By.CSS_SELECTOR, "a.tab.processing"))
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "table.holders"), what="the processing tab")
    assert rows("table.holders tbody tr") == [f"{GO_WORKER} go-delayed main.Resize(640) Go unknown –"]

    follow(browser, browser.find_element(By.CSS_SELECTOR, "a.tab.scheduled"))
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "table.scheduled"), what="the scheduled tab")
    (due, later), = [row.split(" ", 1) for row in rows("table.scheduled tr.task")]
    assert due.endswith("+00:00") and later == 'delayed tests.tasks:record(["later"]) run now delete'

    follow(browser, browser.find_element(By.CSS_SELECTOR, "a.tab.dead"))
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "form.filter"), what="the dead tab")
    assert [row.get_attribute("data-id") for row in browser.find_elements(By.CSS_SELECTOR, "tr.letter")] == [
        failed, other]
    browser.find_element(By.CSS_SELECTOR, "form.filter input[name=func]").send_keys("tests.tasks:always_fail")
    follow(browser, browser.find_element(By.CSS_SELECTOR, "form.filter button"))
    wait_for(lambda: "func=tests.tasks" in browser.current_url, what="the filtered page")
    assert [row.get_attribute("data-id") for row in browser.find_elements(By.CSS_SELECTOR, "tr.letter")] == [failed]
    browser.find_element(By.CSS_SELECTOR, "form.filter input[name=reason]").send_keys("dead")
    follow(browser, browser.find_element(By.CSS_SELECTOR, "form.filter button"))
    wait_for(lambda: "No dead letters match." in browser.page_source, what="nothing to match")


def test_in_a_browser_a_dead_tab_requeues_and_purges_all_its_letters_or_those_its_filter_takes(
        conn, dashboard, browser):
    from selenium.webdriver.common.by import By

    jobs = Queue("jobs", conn)

    def failing(n: int) -> PyTask:
        return PyTask("tests.tasks:always_fail", [f"a{n}"])

    def late(n: int) -> PyTask:
        return PyTask("tests.tasks:slow", [f"s{n}", 1])

    fails = [letter(conn, "jobs", f"failure {n}", failing(n)) for n in range(3)]
    slow = [letter(conn, "jobs", f"too slow {n}", late(n), reason="timed_out") for n in range(2)]
    other = letter(conn, "jobs", "a record failed", PyTask("tests.tasks:record", ["r"]))
    web = dashboard()

    def dead() -> list:
        return [entry["id"] for entry in jobs.dead.list()]

    def tab(**query: str) -> None:
        browser.get(web.base + "/queue?" + urlencode({"queue": "jobs", "tab": "dead", **query}))
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "form.filter"), what="the dead tab")

    tab(func="tests.tasks:always_fail")
    assert [row.get_attribute("data-id") for row in browser.find_elements(By.CSS_SELECTOR, "tr.letter")] == fails
    newer = letter(conn, "jobs", "failed after the page was shown", failing(9))
    follow(browser, browser.find_element(By.CSS_SELECTOR, "div.bulk button.requeue-all"))
    wait_for(lambda: "requeued 3 tasks into jobs with function tests.tasks:always_fail" in browser.page_source,
             what="the requeue's message")
    assert browser.current_url.endswith("/queue?queue=jobs&tab=dead&func=tests.tasks:always_fail")  # back to the tab
    assert conn.lrange("jobs", 0, -1) == [failing(n).serialize() for n in range(3)] and conn.llen("jobs_noti") == 3
    assert dead() == [*slow, other, newer]  # what the page did not show stays

    tab(func="tests.tasks:record")
    follow(browser, browser.find_element(By.CSS_SELECTOR, f'tr.letter[data-id="{other}"] button.requeue'))
    wait_for(lambda: "requeued 1 task into jobs</p>" in browser.page_source, what="one letter's requeue")
    assert browser.current_url.endswith("/queue?queue=jobs&tab=dead&func=tests.tasks:record")  # back to the tab
    assert conn.lrange("jobs", -1, -1) == [PyTask("tests.tasks:record", ["r"]).serialize()]
    assert dead() == [*slow, newer]

    tab(reason="timed_out")
    screenshot(browser, "dashboard-dead")
    follow(browser, browser.find_element(By.CSS_SELECTOR, "div.bulk a.purge"))
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "button.confirm-purge"), what="the confirm page")
    assert browser.find_element(By.CSS_SELECTOR, "strong.count").text == "2"
    assert browser.find_element(By.CSS_SELECTOR, "strong.reason").text == "timed_out"
    assert dead() == [*slow, newer]  # the confirm page itself changes nothing
    later = letter(conn, "jobs", "timed out after the count", late(9), reason="timed_out")
    follow(browser, browser.find_element(By.CSS_SELECTOR, "button.confirm-purge"))
    wait_for(lambda: "purged 2 dead letters of jobs with reason timed_out" in browser.page_source,
             what="the purge's message")
    assert dead() == [newer, later] and conn.llen("jobs") == 4

    tab()
    follow(browser, browser.find_element(By.CSS_SELECTOR, "div.bulk button.requeue-all"))
    wait_for(lambda: "requeued 2 tasks into jobs</p>" in browser.page_source, what="the requeue of all")
    assert dead() == [] and conn.llen("jobs") == conn.llen("jobs_noti") == 6
    assert not browser.find_elements(By.CSS_SELECTOR, "div.bulk")  # nothing left to act on


def test_a_dead_tab_s_bulk_actions_are_posts_with_the_csrf_token_and_a_bad_bound_changes_nothing(conn, dashboard):
    ids = [letter(conn, "jobs", f"failure {n}") for n in range(3)]
    web = dashboard()
    before = snapshot(conn)
    status, page = web.get("/dead/purge?queue=jobs&reason=failed&back=tab")
    assert status == 200 and '<strong class="count">3</strong>' in page and f'name="through" value="{ids[-1]}"' in page
    for form in ({"queue": "jobs", "id": "all", "reason": "failed"}, {"queue": "jobs", "id": "all", "csrf": "wrong"}):
        assert web.request("POST", "/dead/requeue", form)[0] == 403
        assert web.request("POST", "/dead/purge", {**form, "confirm": "yes"})[0] == 403
    for path in ("/dead/requeue", "/dead/purge"):
        status, headers, _ = web.request("POST", path, {"queue": "jobs", "id": "all", "reason": "failed", "confirm": "yes",
                                                        "through": "nonsense", "back": "tab", "csrf": web.csrf()})
        assert status == 303 and headers["Location"] == "/queue?queue=jobs&tab=dead&reason=failed"
        page = web.get(headers["Location"], Cookie=headers["Set-Cookie"].split(";")[0])[1]
        assert 'class="flash error"' in page and "not a dead letter id: nonsense" in page
    assert snapshot(conn) == before


def test_a_queue_s_dead_tab_pages_through_the_letters_that_match(conn, dashboard):
    ids = [letter(conn, "jobs", f"failure {i}", PyTask("tests.tasks:always_fail" if i % 2 else "tests.tasks:record",
                                                        [i])) for i in range(50)]
    web = dashboard()
    before = snapshot(conn)
    status, page = web.get("/queue?queue=jobs&tab=dead&func=tests.tasks:always_fail")
    assert status == 200 and re.findall(r'<tr class="letter" data-id="([^"]+)"', page) == ids[1:40:2]
    status, rest = web.get(unescape(re.search(r'<a class="next" href="([^"]+)"', page).group(1)))
    assert status == 200 and re.findall(r'<tr class="letter" data-id="([^"]+)"', rest) == ids[41::2]
    assert 'class="next"' not in rest
    assert web.get("/queue?queue=jobs&tab=dead&after=nonsense")[0] == 404
    assert web.get("/queue?queue=jobs&tab=nonsense")[0] == 404 and web.get("/queue?tab=dead")[0] == 400
    for start in ("-5", "x", str(10 ** 30)):
        for tab in ("pending", "scheduled"):
            assert web.get(f"/queue?queue=jobs&tab={tab}&start={start}")[0] == 200
    assert snapshot(conn) == before


# Scheduled tasks: run now, delete

def test_in_a_browser_a_scheduled_task_is_run_now_or_deleted_exactly(conn, dashboard, browser):
    from selenium.webdriver.common.by import By

    jobs = Queue("jobs", conn)
    jobs.enqueue(PyTask("tests.tasks:record", ["plain"]), delay=3600)
    tracked = jobs.enqueue(PyTask("tests.tasks:record", ["tracked"]), delay=7200, result_ttl=600)
    jobs.enqueue_many([PyTask("tests.tasks:record", ["twin"])] * 2, delay=10800)  # one due time, one blob
    web = dashboard()

    def shown() -> list:
        return [row.text.split(" ", 1)[1] for row in browser.find_elements(By.CSS_SELECTOR, "table.scheduled tr.task")]

    def click(row: int, button: str, message: str) -> None:
        follow(browser, browser.find_elements(By.CSS_SELECTOR, f"table.scheduled tr.task button.{button}")[row])
        wait_for(lambda: message in browser.page_source, what=message)

    browser.get(web.base + "/queue?queue=jobs&tab=scheduled")
    assert shown() == ['delayed tests.tasks:record(["plain"]) run now delete',
                       'delayed tests.tasks:record(["tracked"]) run now delete',
                       'delayed tests.tasks:record(["twin"]) run now delete',
                       'delayed tests.tasks:record(["twin"]) run now delete']
    click(1, "run-now", "moved the scheduled task into jobs: it runs next")
    assert conn.lrange("jobs", 0, -1) == [PyTask("tests.tasks:record", ["tracked"], options={"id": tracked.id})
                                          .serialize()] and conn.llen("jobs_noti") == 1
    assert tracked.status() == "pending" and tracked.info().due is None
    assert jobs.cancel(tracked.id)  # the record names where the task is now: in the queue
    assert conn.llen("jobs") == 0 and conn.llen("jobs_noti") == 0

    click(2, "run-now", "moved the scheduled task into jobs: it runs next")  # one of the twins
    assert conn.llen("jobs") == 1 and conn.llen("jobs_noti") == 1 and conn.zcard("jobs_scheduled") == 2
    click(0, "delete", "deleted the scheduled task of jobs")
    assert shown() == ['delayed tests.tasks:record(["twin"]) run now delete'] and conn.llen("jobs") == 1

    for button in ("run-now", "delete"):  # the member changed since the page showed it: nothing happens
        browser.get(web.base + "/queue?queue=jobs&tab=scheduled")
        conn.zadd("jobs_scheduled", {conn.zrange("jobs_scheduled", 0, 0)[0]: time.time() + 60})
        click(0, button, "that task is no longer scheduled in jobs")
    assert conn.zcard("jobs_scheduled") == 1 and conn.llen("jobs") == 1 and conn.llen("jobs_noti") == 1


def test_in_a_browser_the_scheduled_tab_and_the_overview_tag_retries_and_show_whole_calls(conn, dashboard, browser):
    from selenium.webdriver.common.by import By

    jobs = Queue("jobs", conn)
    jobs.enqueue(PyTask("tests.tasks:always_fail", ["counted"], max_retries=3, backoff=600))
    settle_by_a_worker(jobs)  # attempt 1 failed: attempt 2 of 4 waits 600 s
    jobs.enqueue(PyTask("tests.tasks:always_fail", ["forever"], retry=-1))
    settle_by_a_worker(jobs)  # rescheduled byte for byte: only its member's nonce says it is a retry
    long_func = "tests.tasks:" + "a_function_whose_name_alone_is_longer_than_sixty_characters_in_all"
    jobs.enqueue(PyTask(long_func, ["an argument longer than the sixty characters a table cell used to keep"]),
                 delay=3600)
    web = dashboard()

    def kinds(rows: str):
        return [(row.find_element(By.CSS_SELECTOR, "td.kind").text,
                 len(row.find_elements(By.CSS_SELECTOR, "td.kind span.tag.retry")))
                for row in browser.find_elements(By.CSS_SELECTOR, rows)]

    expected = [("retry", 1), ("retry attempt 2 of 4", 1), ("delayed", 0)]
    browser.get(web.base + "/queue?queue=jobs&tab=scheduled")
    assert kinds("table.scheduled tr.task") == expected
    whole = f'{long_func}(["an argument longer than the sixty characters a table cell used to keep"])'
    assert browser.find_elements(By.CSS_SELECTOR, "table.scheduled tr.task code.task")[-1].text == whole
    browser.get(web.base + "/")
    assert kinds("#scheduled table.scheduled tr.task") == expected
    assert whole in browser.find_element(By.CSS_SELECTOR, "#scheduled").text


def test_deleting_a_tracked_scheduled_task_cancels_it_and_running_a_retry_now_keeps_it_retrying(conn):
    jobs = Queue("jobs", conn)
    deleted = jobs.enqueue(PyTask("tests.tasks:record", ["x"]), delay=600, result_ttl=600)
    [(_, _, _, ref, _)] = inspect.next_scheduled(conn, "jobs", 10, 0, 100)
    assert admin.delete_scheduled(conn, "jobs", ref) and deleted.status() == "cancelled"
    assert not admin.delete_scheduled(conn, "jobs", ref) and not admin.run_scheduled(conn, "jobs", ref)
    retried = jobs.enqueue(PyTask("tests.tasks:always_fail", ["f"], max_retries=2, backoff=600), result_ttl=600)
    ops = WorkerOps(jobs)
    claim = Claim("delayed-py-" + "0" * 32, ops.claim("delayed-py-" + "0" * 32, timeout=1),
                  Holding(jobs, 1, Lifecycle("worker")))
    assert Worker(jobs, ["tests.tasks"]).execute(claim.blob).apply(ops, claim)
    assert retried.status() == "retrying" and retried.info().due > time.time() + 500
    [(_, _, _, ref, _)] = inspect.next_scheduled(conn, "jobs", 10, 0, 100)
    assert admin.run_scheduled(conn, "jobs", ref)
    info = retried.info()
    assert (info.status, info.error) == ("retrying", "ValueError: f always fails") and info.due <= time.time()
    assert conn.llen("jobs") == 1 and conn.llen("jobs_noti") == 1 and jobs.cancel(retried.id)


def test_run_now_and_delete_are_posts_with_the_csrf_token_and_a_bad_ref_changes_nothing(conn, dashboard):
    Queue("jobs", conn).enqueue(PyTask("tests.tasks:record", ["x"]), delay=600)
    [(_, _, due, ref, _)] = inspect.next_scheduled(conn, "jobs", 10, 0, 100)
    web = dashboard()
    before = snapshot(conn)
    for path in ("/scheduled/run", "/scheduled/delete"):
        for form in ({"queue": "jobs", "ref": ref}, {"queue": "jobs", "ref": ref, "csrf": "wrong"}):
            status, _, text = web.request("POST", path, form)
            assert status == 403 and "Nothing was changed" in text
        assert web.get(f"{path}?{urlencode({'queue': 'jobs', 'ref': ref})}")[0] == 405
        nonce, digest = ref.split(":")[1:]
        for bad in ("", "nonsense", f"1_0:{nonce}:{digest}", f"nan:{nonce}:{digest}", f"{due!r}:{nonce}:{'0' * 40}",
                    f"{due!r}:{'0' * 16}:{digest}", f"{due + 1!r}:{nonce}:{digest}", ref + "\n"):
            status, headers, _ = web.request("POST", path, {"queue": "jobs", "ref": bad, "csrf": web.csrf()})
            assert status == 303 and headers["Location"] == "/queue?queue=jobs&tab=scheduled"
            page = web.get(headers["Location"], Cookie=headers["Set-Cookie"].split(";")[0])[1]
            assert "no longer scheduled in jobs" in page, bad
    assert snapshot(conn) == before


@pytest.mark.parametrize("due", [1e20, 1.5e-7, 1764087693.4567871, -3.0, float("inf"), 0.1, 5e-324])
def test_a_scheduled_task_is_named_exactly_whatever_its_due_time(conn, due):
    """A ref carries the score as Redis writes it, which Redis reads back as the same double."""
    conn.zadd("jobs_scheduled", {b"\1" * 8 + b"blob": due})
    [(_, _, seen, ref, _)] = inspect.next_scheduled(conn, "jobs", 10, 0, 100)
    assert seen == due and admin.run_scheduled(conn, "jobs", ref)
    assert conn.lrange("jobs", 0, -1) == [b"blob"] and conn.llen("jobs_noti") == 1 and not conn.exists("jobs_scheduled")
