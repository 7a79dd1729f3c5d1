"""TaskOptions: every option is checked the same from the library and the command line, reaches the
worker as it was given, and the tracked blob's layout is pinned byte by byte for Python and Lua."""
import dataclasses
import datetime
import json
import math
import time

import msgpack
import pytest

from delayed import AsyncQueue, GoTask, PyTask, Queue, TaskOptions, delayed
from delayed.ops.cli import main
from delayed.protocol.worker_ops import WorkerOps
from delayed.wire import options as task_options
from delayed.wire import tracking
from delayed.wire.options import MAX_SECONDS, PUBLIC, Place
from delayed.wire.task import BIN_MARKERS, GO_WITH_OPTIONS, TRACKED_TAIL, WITH_OPTIONS, decode_task

from .conftest import ROOT

FUTURE = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)

BAD = [
    ("retry", -7, "retry must be from -1 (forever) to 2147483647, got -7"),
    ("retry", 10 ** 20, "retry must be from -1 (forever) to 2147483647, got 100000000000000000000"),
    ("max_retries", -1, "max_retries must be from 0 to 2147483647, got -1"),
    ("backoff", -2.0, "backoff must be 0 or more seconds, got -2.0"),
    ("backoff", math.inf, "backoff must be a finite number of seconds, got inf"),
    ("time_limit", math.nan, "time_limit must be a finite number of seconds, got nan"),
    ("time_limit", 0.0, "time_limit must be above 0 seconds, got 0.0"),
    ("time_limit", 1e12, "time_limit must be at most 316224000 seconds (ten years), got 1000000000000.0"),
    ("delay", -5.0, "delay must be 0 or more seconds, got -5.0"),
    ("delay", 1e308, "delay must be at most 316224000 seconds (ten years), got 1e+308"),
    ("delay", -math.inf, "delay must be a finite number of seconds, got -inf"),
    ("unique_for", -1.0, "unique_for must be above 0 seconds, got -1.0"),
    ("unique_for", math.nan, "unique_for must be a finite number of seconds, got nan"),
    ("result_ttl", math.inf, "result_ttl must be a finite number of seconds, got inf"),
]
"""(option, value, the message both the library and the CLI give)."""


@pytest.fixture
def queue(conn):
    return Queue("q", conn)


@pytest.mark.parametrize("name, value, message", BAD)
def test_a_bad_value_is_one_valueerror_naming_the_option_in_the_library_and_the_cli(conn, redis_server, capsys,
                                                                                    name, value, message):
    for entry in (lambda: PyTask("tests.tasks:add", **{name: value}), lambda: TaskOptions(**{name: value}),
                  lambda: delayed(AsyncQueue("q", conn))(**{name: value})):
        with pytest.raises(ValueError) as error:
            entry()
        assert str(error.value) == message
    flag = "--" + name.replace("_", "-")
    with pytest.raises(SystemExit) as exited:
        main(["enqueue", "tests.tasks:add", "1", "2", f"{flag}={value!r}", "--redis-url", redis_server.url])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.splitlines()[-1].endswith(message), err
    assert "Traceback" not in err and conn.keys() == []


def test_an_at_more_than_ten_years_ahead_is_refused_and_one_past_is_now(queue, conn):
    with pytest.raises(ValueError, match="^at must be at most ten years from now"):
        queue.enqueue(PyTask("m:f"), at=datetime.datetime.now() + datetime.timedelta(days=3700))
    queue.enqueue(PyTask("m:f"), at=datetime.datetime(2001, 1, 1))
    assert conn.llen("q") == 1


def test_an_unknown_option_is_a_typeerror_listing_the_options(queue):
    for entry in (lambda: PyTask("m:f", max_retry=3), lambda: queue.enqueue(PyTask("m:f"), max_retry=3),
                  lambda: delayed(queue)(max_retry=3)):
        with pytest.raises(TypeError, match="^unknown task option 'max_retry'; the options are: retry, max_retries"):
            entry()


SAMPLES = {"retry": 2, "max_retries": 3, "backoff": "tests.tasks:add", "time_limit": 2.5, "delay": 60.0,
           "at": FUTURE, "unique_for": 30.0, "unique_key": "report", "result_ttl": 60.0, "expires": 3600.0,
           "rate_limit": "100/m", "concurrency_limit": 5, "limit_key": "customer-7",
           "headers": {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
"""A value of each public option: test_every_option_reaches_the_worker fails for an option without one."""


def test_every_public_option_has_a_sample_and_the_state_options_are_not_public():
    assert set(SAMPLES) == set(PUBLIC)
    assert {"attempt", "crashes", "unique_token", "id", "expires_at"} & set(PUBLIC) == set()


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_option_reaches_the_worker(queue, conn, name):
    """Given by name to enqueue, an option that rides in the blob decodes as the worker decodes it; one
    that says how to enqueue did what it says."""
    given = {name: SAMPLES[name]}
    if name == "unique_key":
        given["unique_for"] = 30.0
    if name == "limit_key":
        given["concurrency_limit"] = 1
    if name == "at":
        given = {"at": datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=60)}
    handle = queue.enqueue(PyTask("tests.tasks:add", [1, 2]), **given)
    scheduled = conn.zrange("q_scheduled", 0, -1, withscores=True)
    blob = scheduled[0][0][8:] if scheduled else conn.lindex("q", 0)
    task = PyTask.deserialize(blob)  # what the worker does with the blob it claims
    if task_options.place_of(name) is not Place.ENQUEUE:
        assert getattr(task.options, name) == SAMPLES[name]
    elif name in ("delay", "at"):
        assert len(scheduled) == 1 and scheduled[0][1] > time.time() + 50
    elif name == "expires":
        assert abs(task.options.expires_at - (time.time() + 3600)) < 5
    elif name == "unique_for":
        assert conn.pttl(f"q_unique:{task.options.unique_key}") > 25_000
    else:
        assert handle is not None and handle.id == task.options.id and conn.hget(f"q_task:{handle.id}", "ttl") == b"60"


def test_the_decorator_offers_every_option(queue, conn):
    given = {name: value for name, value in SAMPLES.items() if name != "delay"}  # delay or at, not both

    @delayed(queue)(**given)
    def add(a, b):
        return a + b

    add.__module__, add.__qualname__ = "tests.tasks", "add"
    handle = add.delay(1, 2)
    assert handle is not None
    [(member, due)] = conn.zrange("q_scheduled", 0, -1, withscores=True)
    task = PyTask.deserialize(member[8:])
    assert due == FUTURE.timestamp()
    carried = {name: getattr(task.options, name) for name in SAMPLES if task_options.place_of(name) is not Place.ENQUEUE}
    assert carried == {name: SAMPLES[name] for name in carried} and task.options.id == handle.id
    assert conn.exists(f"q_unique:{task.options.unique_key}")


def test_enqueue_options_win_over_the_tasks_own(queue, conn):
    task = PyTask("m:f", delay=600, max_retries=1)
    queue.enqueue(task, delay=0, max_retries=4)
    assert conn.zcard("q_scheduled") == 0 and PyTask.deserialize(conn.lindex("q", 0)).options.max_retries == 4
    queue.enqueue(task, at=FUTURE)  # a due time given to enqueue replaces the task's, delay or at alike
    assert conn.zscore("q_scheduled", conn.zrange("q_scheduled", 0, 0)[0]) == FUTURE.timestamp()


GO_SAMPLES = {**{name: value for name, value in SAMPLES.items() if name != "retry"}, "backoff": 1.5}
"""A value of each option a GoTask takes: all but keakon's retry, and a backoff in seconds."""


@pytest.mark.parametrize("name", sorted(GO_SAMPLES))
def test_every_option_a_gotask_takes_reaches_its_blob(queue, conn, name):
    """As test_every_option_reaches_the_worker, for a GoTask: an option that rides in the blob decodes
    from its third element; one that says how to enqueue did what it says."""
    given = {name: GO_SAMPLES[name]}
    if name == "unique_key":
        given["unique_for"] = 30.0
    if name == "limit_key":
        given["concurrency_limit"] = 1
    if name == "at":
        given = {"at": datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=60)}
    handle = queue.enqueue(GoTask("main.Add", [1, 2]), **given)
    scheduled = conn.zrange("q_scheduled", 0, -1, withscores=True)
    blob = scheduled[0][0][8:] if scheduled else conn.lindex("q", 0)
    task = GoTask.deserialize(blob)
    assert task.args == [1, 2] and msgpack.unpackb(blob)[1] == msgpack.packb([1, 2])
    if task_options.place_of(name) is not Place.ENQUEUE:
        assert getattr(task.options, name) == GO_SAMPLES[name] and blob[:1] == b"\x93"
    elif name in ("delay", "at"):
        assert len(scheduled) == 1 and scheduled[0][1] > time.time() + 50
        assert blob == GoTask("main.Add", [1, 2]).serialize()  # go-delayed's bytes: nothing rides in it
    elif name == "expires":
        assert abs(task.options.expires_at - (time.time() + 3600)) < 5
    elif name == "unique_for":
        assert conn.pttl(f"q_unique:{task.options.unique_key}") > 25_000 and task.options.unique_token
    else:
        assert handle is not None and handle.id == task.options.id and conn.hget(f"q_task:{handle.id}", "ttl") == b"60"
        assert tracking.task_id(blob) == handle.id


def test_a_gotask_refuses_retry_and_a_backoff_function_saying_what_to_use(queue):
    for entry in (lambda: GoTask("main.F", retry=3), lambda: queue.enqueue(GoTask("main.F"), retry=3),
                  lambda: GoTask("main.F", options=TaskOptions(retry=-1))):
        with pytest.raises(TypeError, match="^a GoTask has no retry .*: use max_retries$"):
            entry()
    for entry in (lambda: GoTask("main.F", max_retries=2, backoff="tests.tasks:add"),
                  lambda: queue.enqueue(GoTask("main.F", max_retries=2), backoff="tests.tasks:add")):
        with pytest.raises(TypeError, match="^a GoTask's backoff is seconds, not a Python function's path"):
            entry()
    assert queue.conn.keys() == []


def test_a_batch_goes_in_with_one_due_time(queue, conn):
    with pytest.raises(ValueError, match="^enqueue_many enqueues a batch with one delay, at and result_ttl"):
        queue.enqueue_many([PyTask("m:f", delay=60), PyTask("m:g")])
    with pytest.raises(TypeError, match="^enqueue_many takes no unique task"):
        queue.enqueue_many([PyTask("m:f")], unique_for=60)
    assert queue.enqueue_many([PyTask("m:f", delay=60), PyTask("m:g", delay=60)]) == 2
    assert conn.zcard("q_scheduled") == 2 and conn.keys() != []


GOLDEN_TRACKED = bytes.fromhex(
    "95" "a3" "6d3a66" "91" "01" "80" "00"  # [ "m:f", [1], {}, 0,
    "83" "ab" "6d61785f72657472696573" "02"  # { "max_retries": 2,
    "a7" "61747465" "6d7074" "01"  # "attempt": 1,
    "a2" "6964" "d9" "20" "30313233343536373839616263646566" "30313233343536373839616263646566")  # "id": ... }]
"""A tracked blob with options, byte by byte: the id is the map's last entry, a str8 of 32 bytes."""


def test_the_tracked_blob_layout_is_pinned_byte_by_byte():
    task_id = "0123456789abcdef" * 2
    task = PyTask("m:f", [1], options=TaskOptions(max_retries=2, attempt=1, id=task_id))
    assert task.serialize() == GOLDEN_TRACKED
    assert GOLDEN_TRACKED[:1] == WITH_OPTIONS and GOLDEN_TRACKED[-37:-32] == TRACKED_TAIL
    assert tracking.task_id(GOLDEN_TRACKED) == task_id and decode_task(GOLDEN_TRACKED) == task
    assert msgpack.unpackb(GOLDEN_TRACKED)[4] == {"max_retries": 2, "attempt": 1, "id": task_id}


GOLDEN_GO_TRACKED = bytes.fromhex(
    "93" "a6" "6d61696e2e46" "c4" "01" "01"  # [ "main.F", bin(msgpack of 1),
    "83" "ab" "6d61785f72657472696573" "02"  # { "max_retries": 2,
    "a7" "61747465" "6d7074" "01"  # "attempt": 1,
    "a2" "6964" "d9" "20" "30313233343536373839616263646566" "30313233343536373839616263646566")  # "id": ... }]
"""A tracked GoTask's blob, byte by byte: go-delayed's two elements, then the options map as a PyTask's."""


def test_the_tracked_gotask_layout_is_pinned_byte_by_byte():
    task_id = "0123456789abcdef" * 2
    task = GoTask("main.F", 1, options=TaskOptions(max_retries=2, attempt=1, id=task_id))
    assert task.serialize() == GOLDEN_GO_TRACKED
    assert GOLDEN_GO_TRACKED[:1] == GO_WITH_OPTIONS and GOLDEN_GO_TRACKED[-37:-32] == TRACKED_TAIL
    assert tracking.task_id(GOLDEN_GO_TRACKED) == task_id and decode_task(GOLDEN_GO_TRACKED) == task


TRACKED_ID = "0123456789abcdef" * 2
DECOY = msgpack.packb(["m:f", [], {"x": 1, "id": TRACKED_ID}])
"""A three-element PyTask (0x93, as a GoTask with options) whose kwargs end as a tracked blob does."""
BLOBS = {
    "pytask": (GOLDEN_TRACKED, TRACKED_ID),
    "gotask fixstr": (GOLDEN_GO_TRACKED, TRACKED_ID),
    "gotask str8": (GoTask("main." + "F" * 40, options=TaskOptions(id=TRACKED_ID)).serialize(), TRACKED_ID),
    "gotask str16": (GoTask("main." + "F" * 300, [1], options=TaskOptions(id=TRACKED_ID)).serialize(), TRACKED_ID),
    "gotask bin16": (GoTask("main.F", "x" * 300, options=TaskOptions(id=TRACKED_ID)).serialize(), TRACKED_ID),
    "pytask kwargs ending with an id": (DECOY, None),
    "go-delayed's NewPyTask kwargs ending with an id": (msgpack.packb(["m:f", None, {"id": TRACKED_ID}]), None),
    "untracked gotask": (GoTask("main.F", TRACKED_ID).serialize(), None),
}
"""Blobs and the tracked id each holds (None: none), for Python's task_id and Lua's track.key alike."""


@pytest.mark.parametrize("name", sorted(BLOBS))
def test_the_tracked_id_is_found_in_both_kinds_of_task_and_nowhere_else(queue, conn, name):
    """tracking.task_id and tracking.lua's track.key agree on every blob: a claim marks the record of
    the id Python finds, and none other."""
    blob, expected = BLOBS[name]
    assert tracking.task_id(blob) == expected
    conn.hset(f"q_task:{TRACKED_ID}", mapping={"status": "pending", "func": "m:f", "ttl": 60})
    conn.set(queue.keys.tracked, 1)  # what enqueuing a tracked task marks
    conn.rpush("q", blob)
    conn.rpush("q_noti", "1")
    assert WorkerOps(queue).claim_batch((), ("delayed-py-" + "4" * 32,))
    assert conn.hget(f"q_task:{TRACKED_ID}", "status") == (b"pending" if expected is None else b"running")


def test_the_scripts_read_the_tracked_layout_python_writes(queue, conn):
    """tracking.lua's track.key reads the first bytes and the tail as Python writes them: its source holds
    Python's constants, and on Redis it finds the golden blob's record."""
    source = (ROOT / "delayed/protocol/lua/tracking.lua").read_text()
    lua_tail = "".join(chr(byte) if chr(byte).isascii() and chr(byte).isalnum() else f"\\{byte}" for byte in TRACKED_TAIL)
    assert f"'{lua_tail}'" in source
    for byte in WITH_OPTIONS + GO_WITH_OPTIONS + BIN_MARKERS:
        assert f"0x{byte:02x}" in source
    task_id = "0123456789abcdef" * 2
    conn.hset(f"q_task:{task_id}", mapping={"status": "pending", "func": "m:f", "ttl": 60})
    conn.set(queue.keys.tracked, 1)  # what enqueuing a tracked task marks
    conn.rpush("q", GOLDEN_TRACKED)
    conn.rpush("q_noti", "1")
    WorkerOps(queue).claim_batch((), ("delayed-py-" + "4" * 32,))
    assert conn.hget(f"q_task:{task_id}", "status") == b"running"


def test_options_are_frozen_and_replace_checks_again():
    options = TaskOptions(max_retries=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_retries = 2  # type: ignore[misc]
    with pytest.raises(ValueError, match="^max_retries must be from 0"):
        options.replace(max_retries=-1)
    assert options.replace(max_retries=None) == TaskOptions() and MAX_SECONDS == 316_224_000


def test_delayed_enqueue_writes_its_options_into_the_task_and_says_so(conn, redis_server, capsys):
    assert main(["enqueue", "tests.tasks:add", "1", "2", "--max-retries", "3", "--time-limit", "5", "--json",
                 "--redis-url", redis_server.url]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["enqueued"]["options"] == {"max_retries": 3, "time_limit": 5.0}
    task = PyTask.deserialize(conn.lindex("default", 0))
    assert (task.options.max_retries, task.options.time_limit) == (3, 5.0)
