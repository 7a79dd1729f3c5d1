"""Workflows across languages in the mixed deployment: chains and groups whose steps are GoTasks, run by
our Go worker (ourgoworker on "ourgo") beside Python steps run by our Python worker (on "py"). Neither
worker knows workflows exist: the scripts that settle each step (flow.lua) release the steps after it,
so a Go step's result reaches a Python step and the other way round, a failure stops a chain until
`delayed dead requeue`, and a sweeper's requeue of a killed Go worker's step runs the workflow on once.
A stock go-delayed worker runs a GoTask step but never reports it ended: the steps after it wait."""
import uuid

from conftest import OURGO, PY, STOCKGO, SWEPT_BY_PY, Deployment, executions, py_results, wait_for

from delayed import GoTask, PyTask, Queue, Step, StepFailed, chain, group


def workflows_done(mixed: Deployment) -> int:
    """How many workflows enqueued on "py" ended done (its counts hash)."""
    return int(mixed.conn.hget(f"{PY}_counts", "workflows_done") or 0)


def test_a_python_go_python_chain_passes_each_result_on(mixed):
    """Python's add(1, 2) on "py", then Go's Add(ctx, a, b) on "ourgo" taking it as b, then Python's
    add(100, ...) taking Go's: 113, each step run by its language's worker."""
    handle = Queue(PY, mixed.conn).enqueue(chain(
        PyTask("tests.tasks:add", [1, 2]),
        Step(GoTask("main.Add", 10), queue=OURGO, takes_result=True),  # Add(ctx, 10, 3)
        Step(PyTask("tests.tasks:add", [100]), takes_result=True),  # add(100, 13)
    ), result_ttl=60)
    assert handle.result(timeout=60) == 113
    assert handle.status() == "done"
    python, go, python_again = [step.info() for step in handle.steps()]
    assert (go.queue, go.func, go.result) == (OURGO, "main.Add", 13)
    assert go.worker.startswith(mixed.our_go_worker.id)
    assert (python.result, python_again.result) == (3, 113)
    assert not any(step.worker.startswith(mixed.our_go_worker.id) for step in (python, python_again))


def test_a_group_of_go_members_gives_a_python_callback_their_results_in_order(mixed):
    """Five GoTasks Add(i, 10*i) on "ourgo", and a Python callback on "py" that receives their results,
    in the members' order, as its last argument: add([], results) returns the list."""
    members = [Step(GoTask("main.Add", [i, 10 * i]), queue=OURGO) for i in range(5)]
    handle = Queue(PY, mixed.conn).enqueue(group(members, callback=PyTask("tests.tasks:add", [[]])), result_ttl=60)
    assert handle.result(timeout=60) == [0, 11, 22, 33, 44]
    *go_steps, callback = handle.steps()
    assert all(step.info().worker.startswith(mixed.our_go_worker.id) for step in go_steps)
    assert callback.info().queue == PY


def test_a_panicking_go_member_reaches_a_python_callback_as_step_failed(mixed):
    """on_member_failure="pass": the Go member that panics is dead-lettered, and the Python callback
    runs all the same, a StepFailed (its id, func, status and the panic) in that member's place."""
    tag = uuid.uuid4().hex
    members = [Step(GoTask("main.Add", [1, 1]), queue=OURGO),
               Step(GoTask("main.Panic", [tag, f"{tag} blew up"]), queue=OURGO),
               Step(GoTask("main.Add", [2, 2]), queue=OURGO)]
    handle = Queue(PY, mixed.conn).enqueue(group(members, callback=PyTask("tests.tasks:record", [tag]),
                                                 on_member_failure="pass"), result_ttl=60)
    assert handle.result(timeout=60) is None  # record's
    panicked = handle.steps()[1]
    failed = StepFailed(panicked.id, "main.Panic", "failed", f"panic: {tag} blew up")
    assert [line for line in py_results(mixed.conn) if tag in line] == [repr((tag, ([2, failed, 4],), {}))]
    assert panicked.status() == "failed" and handle.status() == "done"


def test_a_failing_python_member_reaches_a_go_callback_as_step_failed(mixed):
    """The other way round: a Python member that raises, and a Go callback (Outcomes(results []any))
    that tells the results from the failure, a delayed.StepFailed, by its type."""
    tag = uuid.uuid4().hex
    members = [PyTask("tests.tasks:add", [1, 2]), PyTask("tests.tasks:always_fail", [tag])]
    handle = Queue(PY, mixed.conn).enqueue(group(members, callback=Step(GoTask("main.Outcomes"), queue=OURGO),
                                                 on_member_failure="pass"), result_ttl=60)
    three, failure = handle.result(timeout=60)
    assert three == 3
    assert (failure["failed"], failure["status"]) == ("tests.tasks:always_fail", "failed")
    assert failure["error"].startswith("ValueError") and f"{tag} always fails" in failure["error"]


def test_a_dead_lettered_go_step_stops_the_chain_until_delayed_dead_requeue(mixed):
    """Go's FailOnce fails its first run: the step is dead-lettered, the workflow says failed at that
    step, and the Python step after it waits; `delayed dead requeue` of the letter runs the Go step
    again, with the result it was given, and the chain ends done."""
    tag = uuid.uuid4().hex
    handle = Queue(PY, mixed.conn).enqueue(chain(
        PyTask("tests.tasks:add", [1, 2]),
        Step(GoTask("main.FailOnce", tag), queue=OURGO, takes_result=True),  # FailOnce(ctx, tag, 3)
        Step(PyTask("tests.tasks:add", [100]), takes_result=True),
    ), result_ttl=60)
    wait_for(lambda: handle.status() == "failed", what="the Go step's failure to stop the workflow")
    _, go_step, after = handle.steps()
    info = handle.info()
    assert info.failed == (OURGO, go_step.id)
    assert info.error == f"failed: the first run of {tag} fails"
    assert after.status() == "waiting"

    letter = go_step.info().letter
    assert mixed.cli("dead", "requeue", letter, "--queue", OURGO).strip() == f"requeued 1 task into {OURGO}"
    assert handle.result(timeout=60) == 103
    assert executions(mixed.conn)[tag] == 2
    assert handle.info().failed is None


def test_a_go_worker_killed_mid_chain_is_swept_and_the_chain_ends_once(mixed, mixed_procs):
    """The chain's Go step runs on a worker of its own (on "swept-by-py"), SIGKILLed inside it: our
    Python sweeper requeues the step once its keep-alive lapses, a new Go worker runs it again, and
    the Python step after it runs once: the workflow ends done, counted once."""
    tag = uuid.uuid4().hex
    done_before = workflows_done(mixed)
    first = mixed_procs.our_go_worker(SWEPT_BY_PY)
    handle = Queue(PY, mixed.conn).enqueue(chain(
        PyTask("tests.tasks:count", [f"{tag}-before"]),
        Step(GoTask("main.Slow", [tag, 1500]), queue=SWEPT_BY_PY),
        PyTask("tests.tasks:count", [f"{tag}-after"]),
    ), result_ttl=60)
    wait_for(lambda: mixed.conn.get(f"started:{tag}"), what="the Go step to start")
    first.kill()
    _, go_step, after = handle.steps()
    assert after.status() == "waiting"

    wait_for(lambda: go_step.status() == "pending", what="the sweeper to requeue the Go step")
    mixed_procs.our_go_worker(SWEPT_BY_PY)
    handle.result(timeout=60)
    assert handle.status() == "done"
    assert executions(mixed.conn, "starts")[tag] == 2 and executions(mixed.conn)[tag] == 1
    ran = executions(mixed.conn)
    assert (ran[f"{tag}-before"], ran[f"{tag}-after"]) == (1, 1)
    assert go_step.info().attempts == 2
    assert workflows_done(mixed) == done_before + 1


def test_a_stock_go_delayed_worker_runs_a_go_step_but_its_successor_waits(mixed):
    """go-delayed's worker (on "stockgo") takes the GoTask step and runs it (its side effect happens),
    but never reports the step ended, through our scripts or any other way: its record stays pending,
    the Python step after it waits, and the workflow stays running."""
    tag = uuid.uuid4().hex
    handle = Queue(PY, mixed.conn).enqueue(chain(
        Step(GoTask("main.Count", tag), queue=STOCKGO),
        PyTask("tests.tasks:count", [f"{tag}-after"]),
    ), result_ttl=60)
    wait_for(lambda: executions(mixed.conn).get(tag) == 1, what="go-delayed's worker to run the Go step")
    go_step, after = handle.steps()
    assert go_step.status() == "pending"  # taken and run, as far as its record knows never started
    assert after.status() == "waiting"
    info = handle.info()
    assert (info.status, info.left, info.failed) == ("running", 2, None)
    assert f"{tag}-after" not in executions(mixed.conn)
