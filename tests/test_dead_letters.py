"""Dead letters: stable ids, errors for missing ids, retention, chunked requeue, old lists, the sweeper's log."""
import base64
import json
import logging
import os
import pty
import subprocess
import sys
import time

import pytest

from delayed import PyTask
from delayed.protocol.worker_ops import WorkerOps
from delayed.queue import Queue
from delayed.sweeper import Sweeper
from delayed.sweeper.cli import parser as sweeper_parser
from delayed.wire.dead_letter import record as legacy_record_fields
from delayed.wire.keys import new_worker_id

from . import slowlog
from .conftest import ROOT, WAIT, spawn, wait_for


def delayed(url, *args, **popen):
    """Run `python -m delayed ARGS --redis-url URL`: (exit status, stdout, stderr)."""
    process = subprocess.run([sys.executable, "-m", "delayed", *args, "--redis-url", url], cwd=ROOT,
                             capture_output=True, text=True, timeout=120, **popen)
    return process.returncode, process.stdout, process.stderr


def legacy(blob, reason="failed"):
    """A record as versions before streams pushed it onto the <queue>_dead list: JSON, task in base64."""
    return json.dumps({"reason": reason, "error": "boom", "func": "m:f", "queue": "q", "worker": None,
                       "failed_at": "2026-01-01T00:00:00.000+00:00",
                       "task": base64.b64encode(blob).decode()}).encode()


@pytest.fixture
def queue(conn):
    q = Queue("q", conn, dequeue_timeout=0.1, keep_alive_timeout=5)
    q.worker_id = new_worker_id()
    return q


def bury(queue, task, reason="failed"):
    """Claim the next task and dead-letter it, as a worker does."""
    queue.enqueue(task)
    held = WorkerOps(queue).claim(queue.worker_id)
    assert queue.dead.bury(queue.worker_id, held, legacy_record_fields(reason=reason, error="e", blob=held, queue="q",
                                                                       worker=queue.worker_id, func=task.func_path))


def listed(url, *args):
    status, out, err = delayed(url, "dead", "list", "--queue", "q", "--json", *args)
    assert status == 0, err
    return json.loads(out)


def test_ids_are_stable_across_requeues_and_a_requeued_task_is_notified(conn, redis_server, queue):
    for n in range(3):
        bury(queue, PyTask("m:f", [n]))
    ids = [row["id"] for row in listed(redis_server.url)]
    assert len(set(ids)) == 3
    status, out, err = delayed(redis_server.url, "dead", "requeue", ids[0], "--queue", "q")
    assert status == 0 and out.strip() == "requeued 1 task into q", err
    assert conn.lrange("q", 0, -1) == [PyTask("m:f", [0]).serialize()] and conn.llen("q_noti") == 1
    status, out, _ = delayed(redis_server.url, "dead", "show", ids[2], "--queue", "q", "--json")
    assert status == 0 and json.loads(out)["id"] == ids[2] and json.loads(out)["task"]["args"] == [2]
    assert [row["id"] for row in listed(redis_server.url)] == ids[1:]
    status, out, _ = delayed(redis_server.url, "dead", "delete", ids[1], "--queue", "q")
    assert status == 0 and [row["id"] for row in listed(redis_server.url)] == ids[2:]
    assert out == "deleted 1 dead letter of q\n"
    status, out, _ = delayed(redis_server.url, "dead", "purge", "--yes", "--queue", "q")
    assert status == 0 and out == "purged 1 dead letter of q\n"


def test_dead_list_says_when_more_letters_remain_and_how_to_page_on(conn, redis_server, queue):
    for n in range(3):
        bury(queue, PyTask("m:f", [n]))
    ids = [row["id"] for row in listed(redis_server.url)]
    for json_flag in ([], ["--json"]):
        status, out, err = delayed(redis_server.url, "dead", "list", "--queue", "q", "--limit", "2", *json_flag)
        assert status == 0 and ids[1] in out and ids[2] not in out and err == f"more: --after {ids[1]}\n", err
    status, out, err = delayed(redis_server.url, "dead", "list", "--queue", "q", "--after", ids[1], "--limit", "1")
    assert status == 0 and ids[2] in out and err == ""
    status, out, err = delayed(redis_server.url, "dead", "list", "--queue", "q", "--limit", "3")
    assert status == 0 and err == ""
    status, out, err = delayed(redis_server.url, "dead", "list", "--limit", "0")
    assert status == 2 and "argument --limit: must be a positive number" in err
    status, out, err = delayed(redis_server.url, "dead", "list", "--help")
    assert status == 0 and "(default: 20)" in out


def test_a_missing_id_is_an_error_naming_it_and_nothing_changes(conn, redis_server, queue):
    bury(queue, PyTask("m:f"))
    [row] = listed(redis_server.url)
    for action in ("requeue", "delete", "show"):
        status, out, err = delayed(redis_server.url, "dead", action, row["id"], "99-0", "--queue", "q") \
            if action != "show" else delayed(redis_server.url, "dead", action, "99-0", "--queue", "q")
        assert status == 1 and "99-0" in err and row["id"] not in err, (action, out, err)
        assert conn.llen("q") == 0 and [r["id"] for r in listed(redis_server.url)] == [row["id"]]
    status, _, err = delayed(redis_server.url, "dead", "requeue", "99", "--queue", "q")
    assert status == 1 and "99" in err and conn.llen("q") == 0


BAD_IDS = ["1-0\n", "\u0661-\u0660", "1-\u0660", "18446744073709551616-0", "0-99999999999999999999"]
"""Not stream ids: a trailing newline, Arabic-Indic digits, a part past 2**64 - 1."""
LAST_ID = "18446744073709551615-18446744073709551615"


@pytest.mark.parametrize("bad", BAD_IDS)
def test_an_id_that_is_not_a_stream_id_is_refused_before_redis_in_one_line(conn, redis_server, queue, bad):
    bury(queue, PyTask("m:f"))
    before = conn.xrange("q_dead_letters")
    for words in (["show", bad], ["requeue", bad], ["delete", bad], ["list", "--after", bad]):
        status, out, err = delayed(redis_server.url, "dead", *words, "--queue", "q")
        assert status == 1 and out == "" and err.count("\n") == 1, (words, err)
        assert err.startswith("delayed: not a dead letter id: ") and "Redis" not in err, (words, err)
    assert conn.xrange("q_dead_letters") == before and conn.llen("q") == 0


def test_the_last_possible_id_is_an_id(conn, redis_server, queue):
    bury(queue, PyTask("m:f"))
    assert listed(redis_server.url, "--after", LAST_ID) == []  # Redis refuses a range starting after it
    status, out, err = delayed(redis_server.url, "dead", "show", LAST_ID, "--queue", "q")
    assert status == 1 and err == f"delayed: no dead letter {LAST_ID} in q_dead_letters\n"


def test_dead_list_shows_entries_that_are_not_json_or_hold_no_task(conn, redis_server, queue):
    conn.rpush("q_dead", b"\xff not json", legacy(b"\xc1junk", "malformed"), b'{"reason": "failed"}', b"[1, 2]")
    bury(queue, PyTask("m:f"))
    rows = listed(redis_server.url)
    assert len(rows) == 5 and len({row["id"] for row in rows}) == 5
    assert rows[0]["func"] == "m:f"
    assert rows[1]["reason"] == "undecodable" and rows[1]["task"] is None and rows[1]["error"].startswith("not a JSON")
    assert rows[2]["reason"] == "malformed" and rows[2]["task"] == {"undecodable": 5}
    assert rows[3]["reason"] == "failed" and rows[3]["task"] is None
    assert rows[4]["reason"] == "undecodable"
    status, out, err = delayed(redis_server.url, "dead", "list", "--queue", "q")
    assert status == 0 and out.count("\n") == 6, err
    status, _, err = delayed(redis_server.url, "dead", "requeue", rows[1]["id"], "--queue", "q")
    assert status == 1 and rows[1]["id"] in err and "no task" in err and conn.llen("q") == 0


def test_old_lists_are_migrated_on_first_touch_and_lose_nothing(conn, redis_server, queue):
    blobs = [PyTask("m:f", [n]).serialize() for n in range(3)]
    conn.rpush("q_dead", *[legacy(blob) for blob in blobs])
    bury(queue, PyTask("m:new"))                                # a new letter while the old list is there
    conn.rpush("q_dead", legacy(PyTask("m:late").serialize()))  # an old worker, still running, buries one
    # the old list's letters come after the ones written since: they get their ids as they move
    assert [row["func"] for row in queue.dead.list()] == ["m:new", "m:f", "m:f", "m:f", "m:f"]
    assert not conn.exists("q_dead")
    assert queue.dead.count() == 5
    status, out, err = delayed(redis_server.url, "dead", "requeue", "--all", "--queue", "q")
    assert status == 0 and out.strip() == "requeued 5 tasks into q", err
    assert sorted(conn.lrange("q", 0, -1)) == sorted(blobs + [PyTask("m:late").serialize(),
                                                              PyTask("m:new").serialize()])
    assert conn.llen("q_noti") == 5 and queue.dead.count() == 0


def test_purge_counts_and_deletes_old_and_new_letters(conn, redis_server, queue):
    conn.rpush("q_dead", legacy(b"x"))
    bury(queue, PyTask("m:f"))
    status, _, err = delayed(redis_server.url, "dead", "purge", "--queue", "q")
    assert status == 2 and "--yes" in err and queue.dead.count() == 2
    status, out, _ = delayed(redis_server.url, "dead", "purge", "--queue", "q", "--yes", "--json")
    assert status == 0 and json.loads(out) == {"purged": 2} and queue.dead.count() == 0


def test_retention_bounds_the_letters_by_count_and_by_age(conn):
    counted = Queue("q", conn, dead_max=100, dead_max_age=0)
    counted.worker_id = new_worker_id()
    for n in range(400):
        bury(counted, PyTask("m:f", [n]))
    assert 100 <= counted.dead.count() < 150  # trimmed as written, by whole stream nodes
    assert counted.dead.list(count=1)[0]["task"] != PyTask("m:f", [0]).serialize()

    conn.flushall()
    aged = Queue("q", conn, dead_max=0, dead_max_age=1)
    aged.worker_id = new_worker_id()
    for n in range(300):
        bury(aged, PyTask("m:f", [n]))
    time.sleep(1.1)
    bury(aged, PyTask("m:f", ["fresh"]))
    assert aged.dead.count() < 100


def test_the_sweeper_logs_each_crash_loop_it_dead_letters(conn, queue, caplog):
    caplog.set_level(logging.WARNING, logger="delayed.sweeper")
    queue.enqueue_many([PyTask("m:poison"), PyTask("m:other")])
    conn.rpush("q", b"\xc1")
    conn.rpush("q_noti", 1)
    for _ in range(3):  # each time, a worker of ours takes the poison (and the garbage) and dies
        conn.hset("q_processing", new_worker_id(), conn.lpop("q"))
        conn.lpop("q_noti")
        if conn.lindex("q", -1) == b"\xc1":
            conn.hset("q_processing", new_worker_id(), conn.rpop("q"))
            conn.lpop("q_noti")
        Sweeper([queue], max_crashes=2).sweep()
        conn.lmove("q", "q", "RIGHT", "LEFT")  # the poison, requeued at the tail, to the head
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "queue 'q'" in warnings[0] and "a task its worker died holding (malformed)" in warnings[0]
    assert "queue 'q'" in warnings[1] and "function m:poison" in warnings[1] and "died holding it 3 times" in warnings[1]
    assert [(letter["reason"], letter["func"]) for letter in queue.dead.list()] == [
        ("malformed", None), ("crash_loop", "m:poison")]
    assert conn.hlen("q_processing") == 0 and conn.lrange("q", 0, -1) == [PyTask("m:other").serialize()]


def test_show_and_requeue_of_one_letter_do_not_download_the_list(conn, redis_server, queue):
    letter = legacy_record_fields(reason="failed", error="e", blob=b"x" * 20_000, queue="q", worker=None)
    for _ in range(300):
        queue.enqueue(PyTask("m:f", ["x" * 20_000]))
        assert queue.dead.bury(queue.worker_id, WorkerOps(queue).claim(queue.worker_id), letter)
    [first] = queue.dead.list(count=1)

    def sent(*args):
        before = int(conn.info("stats")["total_net_output_bytes"])
        status, _, err = delayed(redis_server.url, "dead", *args, first["id"], "--queue", "q")
        assert status == 0, err
        return int(conn.info("stats")["total_net_output_bytes"]) - before

    assert sent("show") < 200_000 and sent("requeue") < 200_000  # the list holds 6 MB


def test_requeue_all_of_50000_letters_is_light_on_the_client(conn, redis_server):
    """50,000 letters of 5 kB (250 MB) in an old list: migrated and requeued without the client ever
    holding the list."""
    padding = "x" * 5000
    with conn.pipeline(transaction=False) as pipe:
        for n in range(50_000):
            pipe.rpush("q_dead", legacy(PyTask("m:f", [n, padding]).serialize()))
            if n % 1000 == 999:
                pipe.execute()
    # The command's own peak RSS, from wait4: RUSAGE_CHILDREN would be the largest of every child this
    # test session reaped so far (a browser of the dashboard's tests, for one), not this command's.
    process = subprocess.Popen([sys.executable, "-m", "delayed", "dead", "requeue", "--all", "--queue", "q",
                                "--redis-url", redis_server.url], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    out, err = process.stdout.read(), process.stderr.read()  # small: one line, and no progress bar
    _, wait_status, usage = os.wait4(process.pid, 0)
    process.returncode = status = os.waitstatus_to_exitcode(wait_status)
    assert status == 0 and out.strip() == "requeued 50000 tasks into q", err
    assert err == ""  # no progress bar: stderr is not a terminal
    assert conn.llen("q") == 50_000 and conn.llen("q_noti") == 50_000 and not conn.exists("q_dead")
    assert usage.ru_maxrss < 200_000, usage.ru_maxrss  # kB


def test_no_command_of_a_requeue_all_does_more_than_a_chunk_of_work(conn, redis_server):
    """2,000 small letters and 2,000 of 5 kB in an old list: every command `dead requeue --all` sends,
    with its script's own calls, does at most a chunk's work, counted in SLOWLOG rather than timed
    (a loaded machine once saw a chunk take 39 ms). Small letters fill a chunk's 500, large ones its
    512 kB; in one script, the whole list would be 12,000 calls and 10 MB."""
    with conn.pipeline(transaction=False) as pipe:
        for n in range(4000):
            pipe.rpush("q_dead", legacy(PyTask("m:f", [n, "x" * (5000 if n >= 2000 else 10)]).serialize()))
        pipe.execute()
    with slowlog.every_command(conn):
        status, out, err = delayed(redis_server.url, "dead", "requeue", "--all", "--queue", "q")
        sent = slowlog.sent(conn)
    assert status == 0 and out.strip() == "requeued 4000 tasks into q", err
    assert conn.llen("q") == conn.llen("q_noti") == 4000 and not conn.exists("q_dead")
    for command in sent:
        assert len(command.calls) <= REQUEUE_COMMAND_CALLS, command.command[:3]
        assert command.bytes <= REQUEUE_COMMAND_BYTES, command.command[:3]
        for args in [command.command, *command.calls]:  # and no read that grows with the list or the stream
            name = args[0].lower()
            assert name not in slowlog.WHOLE_READS - {b"lrange"}, args[:3]
            assert name != b"xrange" or args[-2].lower() == b"count", args
            assert name != b"lrange" or int(args[3]) - int(args[2]) < 32, args
    scripts = sum(command.command[0] == b"EVALSHA" for command in sent)
    assert scripts >= 4000 // 32 + 4 + 2000 * 5000 // (512 * 1024), scripts  # the migration's, then the requeue's


REQUEUE_COMMAND_CALLS = 2000
"""Calls one command of `dead requeue --all` makes at most: a chunk of 500 letters read 8 at a time,
each moved with 3 calls (about 1,560), or 32 letters migrated (34)."""
REQUEUE_COMMAND_BYTES = 1024 * 1024
"""Bytes one command of it and its script's calls carry at most: a chunk moves tasks until they make
512 kB (about 520 kB), and a migration moves 32 letters of 5 kB (about 170 kB)."""


def test_requeue_all_shows_progress_on_a_terminal(conn, redis_server, queue):
    for n in range(5):
        bury(queue, PyTask("m:f", [n]))
    master, terminal = pty.openpty()
    try:
        process = subprocess.run([sys.executable, "-m", "delayed", "dead", "requeue", "--all", "--queue", "q",
                                  "--redis-url", redis_server.url], cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=terminal, text=True, timeout=60)
        shown = os.read(master, 65536).decode()
    finally:
        os.close(master)
        os.close(terminal)
    assert process.returncode == 0 and "5/5" in shown, shown


def test_the_worker_and_sweeper_command_lines_take_the_retention_bound(conn, redis_server):
    conn.rpush("q", *[b"\xc1 not a task %d" % n for n in range(400)])
    conn.rpush("q_noti", *[b"1"] * 400)
    worker = spawn("delayed.worker", "--queue", "q", "--dead-max", "100", "--dead-max-age", "3600", "tests.tasks",
                   redis_url=redis_server.url)
    try:
        wait_for(lambda: conn.llen("q") == 0 and conn.hlen("q_processing") == 0, what="the queue drained")
    finally:
        worker.terminate()
        assert worker.wait(WAIT) == 0
    assert 100 <= Queue("q", conn).dead.count() < 150
    assert sweeper_parser().parse_args(["--dead-max", "7", "--dead-max-age", "60"]).dead_max == 7


PEAK_RSS = ("import atexit, runpy, sys; atexit.register(lambda: print(open('/proc/self/status').read()"
            ".split('VmHWM:')[1].split()[0], file=sys.stderr)); sys.argv[0] = 'delayed'; "
            "runpy.run_module('delayed', run_name='__main__')")
"""`python -c PEAK_RSS ARGS` runs `delayed ARGS`, then writes its peak RSS in kB (VmHWM) on stderr's last line:
its own, where wait4's ru_maxrss would count the memory of the process that forked it too."""


def test_a_filtered_purge_and_requeue_of_30000_letters_go_in_chunks_light_on_the_client(conn, redis_server):
    """30,000 letters of 5 kB (150 MB), a third of them timed out: `dead purge --reason timed_out --yes` and
    `dead requeue --all --func m:keep` send only small commands and chunks of bulk_dead.lua. SLOWLOG lists
    every command, and a script's own calls before it: each chunk reads the stream 8 letters at a time and
    looks at no more than 500, and the client never holds the stream. Work is counted, not timed."""
    padding = "x" * 5000
    with conn.pipeline(transaction=False) as pipe:
        for n in range(30_000):
            reason, func = ("timed_out", "m:slow") if n % 3 == 0 else ("failed", "m:keep")
            pipe.xadd("q_dead_letters", legacy_record_fields(
                reason=reason, error="e", blob=PyTask(func, [n, padding]).serialize(), queue="q", worker=None, func=func,
                traceback="Traceback (most recent call last):\n" + "  frame\n" * 100))
            if n % 1000 == 999:
                pipe.execute()
    conn.config_set("slowlog-max-len", 200_000)
    conn.config_set("slowlog-log-slower-than", 0)
    conn.slowlog_reset()
    peaks = []
    try:
        for words, said in ((["purge", "--reason", "timed_out", "--yes"], "purged 10000 dead letters of q with reason timed_out"),
                            (["requeue", "--all", "--func", "m:keep"], "requeued 20000 tasks into q with function m:keep")):
            done = subprocess.run([sys.executable, "-c", PEAK_RSS, "dead", *words, "--queue", "q",
                                   "--redis-url", redis_server.url], cwd=ROOT, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0 and done.stdout.strip() == said, done.stderr
            peaks.append(int(done.stderr.split()[-1]))
        entries = sorted(conn.slowlog_get(200_000), key=lambda entry: entry["id"])
    finally:
        conn.config_set("slowlog-log-slower-than", 10_000)
        conn.config_set("slowlog-max-len", 128)
    assert conn.xlen("q_dead_letters") == 0 and conn.llen("q") == conn.llen("q_noti") == 20_000
    sent, own_calls, calls = [], [], []  # (command, the calls a script made for it); lowercase: a script's own call
    for entry in entries[1:]:  # after SLOWLOG RESET
        if entry["command"][:1].islower():
            calls.append(entry["command"])
        else:
            sent.append(entry["command"])
            own_calls.append(calls)
            calls = []
    chunks = [calls for command, calls in zip(sent, own_calls) if calls]
    assert len(chunks) >= 30_000 // 500 + 20_000 // 500  # each letter looked at once, at most 500 a chunk
    for calls in chunks:
        reads = [call for call in calls if call.startswith(b"xrange ")]
        assert all(call.endswith(b" count 8") for call in reads), reads[:3]
        assert len(reads) <= 500 // 8 + 2 and sum(call.startswith(b"xdel ") for call in calls) <= 500
    for command in sent:  # the client's own reads are small: no XRANGE of its own, one letter at most
        assert command.split(b" ", 1)[0] in {b"EVALSHA", b"SCRIPT", b"XLEN", b"XREVRANGE", b"LRANGE", b"LLEN", b"PING",
                                              b"HELLO", b"CLIENT", b"INFO", b"CONFIG", b"SLOWLOG"}, command[:80]
        assert not command.startswith(b"XREVRANGE") or command.endswith(b" 1"), command
    assert max(peaks) < 100_000, peaks  # kB: the stream held 150 MB
    print(f"\n{len(chunks)} chunks, client peaks {peaks} kB")


def test_letters_written_while_a_bulk_requeue_runs_stay(conn, queue):
    """A task that fails again at once must not be requeued again by the same run: requeue_all goes as
    far as the letter that was the newest as it started (here a letter is written between two chunks)."""
    with conn.pipeline(transaction=False) as pipe:
        for n in range(1200):
            pipe.xadd("q_dead_letters", legacy_record_fields(reason="failed", error="e", blob=PyTask("m:f", [n]).serialize(),
                                                             queue="q", worker=None, func="m:f"))
        pipe.execute()
    written = []

    def meanwhile(looked: int, total: int) -> None:
        if not written:
            written.append(conn.xadd("q_dead_letters", legacy_record_fields(
                reason="failed", error="again", blob=PyTask("m:f", ["again"]).serialize(), queue="q", worker=None,
                func="m:f")).decode())

    assert queue.dead.requeue_all(meanwhile, reason="failed") == 1200
    assert [letter["id"] for letter in queue.dead.list()] == written and conn.llen("q") == 1200
