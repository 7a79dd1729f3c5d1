"""The dashboard's workflows: a workflow's page (at /task?id=, as a task's), its steps drawn as a graph
whose nodes link to the steps' pages, large groups drawn as one node, a step's page with its workflow,
the workflow's cancel button, and the overview's flag of a workflow stalled behind a step that a stock
go-delayed worker took; a real dashboard, a real redis-server, a real headless Chromium."""
from delayed import GoTask, PyTask, Queue, Worker, chain, group

from .conftest import wait_for
from .test_dashboard import browser, dashboard, follow, screenshot  # noqa: F401  (fixtures)
from .test_stalled_workflows import GO_WORKER, go_delayed_takes
from .test_workflow_view import failed_chain


def snapshot(conn):
    """Every key's content but the sampler's histories: a hash's fields and values (a read may move on the
    incremental rehash of a large one, which changes its DUMP, not what it holds), any other key's DUMP."""
    return {key: conn.hgetall(key) if conn.type(key) == b"hash" else conn.dump(key)
            for key in sorted(conn.scan_iter()) if not key.endswith(b"_samples")}


def nodes(driver):
    """The graph's step nodes: (place, status, classes)."""
    from selenium.webdriver.common.by import By

    return [(int(node.get_attribute("data-step")), node.get_attribute("data-status"), node.get_attribute("class"))
            for node in driver.find_elements(By.CSS_SELECTOR, "svg.flow g.node.step")]


def test_in_a_browser_a_workflow_is_found_by_id_drawn_as_a_graph_whose_nodes_lead_to_its_steps(
        conn, dashboard, browser):  # noqa: F811
    from selenium.webdriver.common.by import By

    handle = failed_chain(conn)
    ids = [step.id for step in handle.steps()]
    web = dashboard()
    before = snapshot(conn)
    browser.get(web.base + "/")
    browser.find_element(By.CSS_SELECTOR, "header form.find-task input[name=id]").send_keys(handle.id)
    follow(browser, browser.find_element(By.CSS_SELECTOR, "header form.find-task button"))
    assert browser.find_element(By.CSS_SELECTOR, "h2").text == f"Workflow {handle.id} of jobs"
    assert browser.find_element(By.CSS_SELECTOR, "span.flow-status").text == "failed"
    assert browser.find_element(By.CSS_SELECTOR, "dd.stopped-by").text == (
        "step 2 (tests.tasks:always_fail): failed: ValueError: step 2 always fails")
    assert [(place, status) for place, status, _ in nodes(browser)] == [
        (1, "done"), (2, "failed"), (3, "waiting"), (4, "waiting")]
    edges = [edge.get_attribute("class") for edge in browser.find_elements(By.CSS_SELECTOR, "svg.flow path.edge")]
    assert sorted(edges) == ["edge succeeded"] * 3  # 2 waits on 1, 3 on 2, 4 on 3
    assert [row.get_attribute("data-step") for row in browser.find_elements(By.CSS_SELECTOR, "table.steps tr.step")] == [
        "1", "2", "3", "4"]

    follow(browser, browser.find_element(By.CSS_SELECTOR, 'svg.flow a.step-link g.node[data-step="2"]'))
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "span.status"), what="the step's page")
    assert browser.find_element(By.CSS_SELECTOR, "h2").text == f"Task {ids[1]} of jobs"
    assert browser.find_element(By.CSS_SELECTOR, "a.workflow-link").text == handle.id
    assert [place for place, _, classes in nodes(browser) if "current" in classes.split()] == [2]
    follow(browser, browser.find_element(By.CSS_SELECTOR, "a.workflow-link"))
    assert browser.find_element(By.CSS_SELECTOR, "h2").text == f"Workflow {handle.id} of jobs"
    assert snapshot(conn) == before  # looking changes nothing


def test_in_a_browser_a_group_s_members_are_one_node_counted_per_status(conn, dashboard, browser):  # noqa: F811
    from selenium.webdriver.common.by import By

    queue = Queue("big", conn)
    members = [PyTask("tests.tasks:add", [i, i]) for i in range(40)]
    members[24] = members[31] = PyTask("tests.tasks:always_fail", ["member"])
    handle = queue.enqueue(chain(PyTask("tests.tasks:add", [1, 2]),
                                 group(members, callback=PyTask("tests.tasks:record", ["all"]), on_member_failure="pass"),
                                 PyTask("tests.tasks:record", ["then"])))
    Worker(queue, ["tests.tasks"], burst=True).run()
    web = dashboard()
    browser.get(f"{web.base}/task?id={handle.id}")
    [aggregate] = browser.find_elements(By.CSS_SELECTOR, "svg.flow g.node.aggregate")
    assert aggregate.get_attribute("data-steps") == "40"
    assert {count.get_attribute("data-status"): int(count.get_attribute("data-count"))
            for count in aggregate.find_elements(By.CSS_SELECTOR, "text.count")} == {"done": 38, "failed": 2}
    assert [(place, status) for place, status, _ in nodes(browser)] == [(1, "done"), (42, "done"), (43, "done")]
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.flow path.edge")) == 3  # 1 -> members -> 42 -> 43
    assert [int(row.get_attribute("data-step")) for row in browser.find_elements(By.CSS_SELECTOR, "table.steps tr.step")] \
        == [*range(1, 11), 26, 33, 43]
    assert "13 of 43 steps listed" in browser.find_element(By.CSS_SELECTOR, "p.listed").text
    screenshot(browser, "dashboard-workflow")


def test_in_a_browser_the_overview_flags_a_workflow_stalled_behind_a_go_delayed_worker_and_its_page_marks_the_step(
        conn, dashboard, browser):  # noqa: F811
    from selenium.webdriver.common.by import By

    go = Queue("go", conn)
    handle = go.enqueue(chain(GoTask("main.Resize", ["cat.png"]), PyTask("tests.tasks:record", ["after"])))
    web = dashboard()
    browser.get(web.base + "/")
    assert not browser.find_elements(By.CSS_SELECTOR, "p.warning.stalled")
    go_delayed_takes(conn, "go")
    browser.get(web.base + "/")
    [flag] = browser.find_elements(By.CSS_SELECTOR, "#queues p.warning.stalled")
    assert flag.get_attribute("data-queue") == "go" and flag.get_attribute("data-workflow") == handle.id
    assert f"workflow {handle.id} is stalled" in flag.text and f"held by worker {GO_WORKER}" in flag.text
    follow(browser, flag.find_element(By.CSS_SELECTOR, "a"))
    assert browser.find_element(By.CSS_SELECTOR, "section.workflow p.warning.stalled").get_attribute("data-step") == "1"
    assert [(place, "stalled" in classes.split()) for place, _, classes in nodes(browser)] == [(1, True), (2, False)]
    assert "stalled: held by" in browser.find_element(By.CSS_SELECTOR, 'table.steps tr[data-step="1"] td.note').text


def test_a_workflow_is_cancelled_from_its_page_by_a_post_with_the_csrf_token(conn, dashboard):  # noqa: F811
    handle = Queue("jobs", conn).enqueue(chain(PyTask("tests.tasks:add", [1, 2]), PyTask("tests.tasks:add", [3, 4])))
    web = dashboard()
    status, page = web.get(f"/task?id={handle.id}")
    assert status == 200 and 'name="workflow" value="1"' in page
    form = {"queue": "jobs", "id": handle.id, "workflow": "1"}
    before = snapshot(conn)
    status, _, _ = web.request("POST", "/task/cancel", form)
    assert status == 403 and snapshot(conn) == before
    status, headers, _ = web.request("POST", "/task/cancel", {**form, "csrf": web.csrf()})
    assert status == 303 and headers["Location"] == f"/task?id={handle.id}"
    assert handle.status() == "cancelled"
    status, page = web.get(f"/task?id={handle.id}")
    assert status == 200 and 'name="workflow" value="1"' not in page and 'class="flow-status status-cancelled"' in page
