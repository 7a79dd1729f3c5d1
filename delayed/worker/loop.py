"""The worker loop: the protocol alone. It claims tasks, runs each through the pipeline
(delayed.worker.middleware: its middleware around the call, invoke.py's, and decide()'s settlement)
and settles it (release, retry or dead-letter).

A worker serves one queue or several, in priority order or by weight (see delayed.worker.holding.Holdings).

A busy worker claims a batch of tasks per round trip, each held under one of
its worker ids, and releases the finished ones in the same round trip as the
next claim; an idle one blocks on the notification list as go-delayed does.
What the running worker holds (ids, keep-alive, claims, settlements) is its Holdings.
"""
import logging
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Union

import redis

from ..protocol.queue import Queue
from ..protocol.sweeper_ops import DEFAULT_MAX_CRASHES
from ..protocol.worker_ops import DEFAULT_DEQUEUE_TIMEOUT, DEFAULT_KEEP_ALIVE_TIMEOUT, server_of
from ..runtime.due import MOVE_DUE_INTERVAL, move_due_tasks
from ..runtime.lifecycle import Lifecycle
from ..runtime.sweeping import Sweeps
from ..wire.hooks import Middleware as Public
from .allowlist import Allowed, Allowlist, CallCheck
from .background import Every
from .batch import Batch, Lookahead
from .cancels import Cancels, Listening
from .expiry import Expiry
from .holding import NOTE_AFTER, Claim, Holdings, Settlement
from .hooks import AfterCall, BeforeCall, CallHooks, HookedInvoker
from .invoke import Invoker
from .keepalive import KeepAlive
from .limits import Limits
from .metrics import Observe, Observer
from .middleware import Middleware, Pipeline
from .retry import Retries
from .run import Run
from .slots import Job, Slots
from .task_log import TaskLog
from .time_limit import TimeLimit
from .tracking import Tracking

logger = logging.getLogger("delayed.worker")  # the name users configure; the loop is its module

DEFAULT_BATCH = 32
DEFAULT_SWEEP_INTERVAL = 15.0
"""Seconds between a worker's sweeps of its queues: a dead worker's tasks run again within its
keep-alive timeout and this long, while a live worker of ours serves the queue."""
BATCH_TIME = 0.02
"""Seconds a claimed task may wait behind running ones before it goes back to the queue (and a
one-slot worker's batch may take before the next one shrinks): enough for a round of 10 ms tasks
to wait ready for the slots running the round before it."""
POLL = 0.05
"""Seconds a worker with tasks running in threads waits for news (a finished task, a new one)."""
FINISH_SLACK = 1.25
"""A running task should have finished by its start + this x the mean run time (or it is a slow one)."""
MIN_POLL = 0.001
"""The shortest wait for a task on an empty queue (Redis rounds a BLPOP timeout up to a millisecond; 0 is forever)."""


class Worker:
    """Runs PyTasks from one queue, or several in priority order or by weight, calling only the functions it allows.

    A worker claims tasks, runs the allowed ones and settles each: it releases a task that returned,
    retries one that raised (as its `retry` or `max_retries` says), and dead-letters the rest. A busy
    worker claims a batch of tasks per round trip, and releases the finished ones in the same round
    trip as its next claim; an idle one blocks on the queue's notifications, as go-delayed's workers
    do. While it runs, a forked helper refreshes its keep-alive keys, a thread moves due scheduled
    tasks into its queues twice a second, and another sweeps its queues every `sweep_interval`: it
    requeues the tasks of workers that died, as the sweeper does (see `Sweeper`), so a worker started
    after a crash recovers what the dead one held.

    Coroutine functions are allowed too: the worker runs each on its event loop. A plain function that
    returns an awaitable has it awaited the same way. A tracked task's record gets its return value as
    the worker releases it, and its error as the worker retries or dead-letters it.

    A thread listens for the cancels of the tracked tasks it runs (`handle.cancel()`, `delayed cancel
    ID`), on a pubsub connection of its own: a coroutine's task is cancelled (the function gets
    `CancelledError`), a plain function's call is marked (`delayed.current().cancelled`), and a task
    claimed but not started is not called; any of them ends `cancelled`, neither retried nor
    dead-lettered, with one INFO line.

    Each claimed task takes the same steps, in this order: it is decoded (a blob that is not a PyTask is
    dead-lettered: `malformed`, `go_task`, `too_large`); a task whose `expires` passed is dead-lettered
    (`expired`) without being called; its function is looked up in the allowlist
    (`not_allowed`) and its arguments are checked against the function's signature (`bad_arguments`,
    without calling it); its call gets its time limit (its own, else the worker's); a task with a
    `rate_limit` or `concurrency_limit` is admitted in Redis, or held back to run later (see the
    Flow control page); the function is called; the task is settled: released, retried as its options
    say, or dead-lettered, with an ERROR line for each failure; a tracked task's record gets what it
    returned or raised; `observe` is told the outcome; and with `log_tasks` its line is logged.
    (Inside, each step is a middleware of `delayed.worker.middleware`, in that order.) Your
    `middleware` hooks in around the call: its `before_call` once the task is allowed, its arguments
    fit and its limits admitted it, its `around_call` where the function runs, and its `after_call`
    once the task is settled (see `delayed.Middleware`).

    A Worker takes ids of its own (`id`, `ids`), and timing of its own (`dequeue_timeout`,
    `keep_alive_timeout`): it never reads or sets what keakon's Queue (`delayed.queue.Queue`) keeps
    for its `dequeue()` and `release()`.

    Args:
        queue: A Queue, or a sequence of Queues on one Redis, in priority order: the first one's tasks
            are always taken first, the second's only while the first has none, and so on. The
            priority is strict: a busy first queue starves the others, so give a queue that must not
            wait a worker of its own, or give `weights`.
        allow: Module names, modules or functions: what tasks may call. A module allows the public
            functions defined in it (not those it imports). A task naming anything else is
            dead-lettered (reason `not_allowed`). Required: keakon/delayed 1.x called whatever a
            task named.
        keep_alive_interval: Seconds between refreshes of the keep-alive keys (default: a quarter of
            `keep_alive_timeout`, 15); keep it well under `keep_alive_timeout`.
        batch: The most tasks claimed per round trip (default 32), each under its own worker id. The
            batch grows while batches finish within 20 ms and shrinks when they do not, so slow tasks
            are claimed one at a time; 1 turns batching off.
        time_limit: Seconds a task may run before it is failed (a task's own `time_limit` wins). A
            coroutine is cancelled, and awaited until it has stopped, whatever `threads` is. A plain
            function is interrupted with SIGALRM when `threads` is 1, so only when the worker runs in
            the main thread (elsewhere the limit is not enforced, and the log says so once); with
            `threads` > 1, by a `TimeLimitExceeded` injected into its thread.
        threads: Tasks run at once: plain functions each in a thread, coroutine functions on one
            event loop, with up to as many claimed tasks kept ready for the next free slot.
        observe: A hook told each task's outcome as the worker decides it:
            `observe(queue_name, func_path, outcome, seconds)`, the outcome `"done"`, `"retried"`,
            `"failed"`, `"dead"` (func path `""` and seconds None for a dead one), `"held"` (its
            `rate_limit` or `concurrency_limit` held it back: it runs later; seconds None) or `"cancelled"`.
            The worker's metrics count with it; None costs nothing per task. It is a middleware too
            (`delayed.worker.metrics.Observe`), the innermost, after those of `middleware`.
        middleware: `delayed.Middleware` instances whose call hooks run around each task's call, the
            first one outermost: `before_call` in order, `after_call` and `on_call_error` in reverse.
            A `before_call` or `around_call` that raises fails the run as the function raising would
            (retried or dead-lettered as the task's options say); an `on_call_error` or `after_call`
            that raises is logged. `after_call` runs for every task the worker settles, one refused
            before its call too (`call.outcome` `"dead"`, or `"failed"` for arguments that did not
            fit), and one its limits held back (`"held"`). Hooks a middleware does not override cost
            nothing per task.
        burst: Stop (exit status 0) once nothing is running and no queue has a task to give, due
            scheduled ones included: for batch jobs and tests. Tasks scheduled for later (a delay, a
            retry's backoff) stay scheduled for the next worker; a paused queue counts as empty.
        log_tasks: Log one INFO line per finished task on the logger `delayed.worker.tasks`, e.g.
            `task 3f2a... mod:func done in 12.3 ms` (the id is `-` for an untracked task). Off by
            default: on a no-op drain it costs a measurable share of the throughput.
        on_online: Called once as the worker goes online, after it forked its keep-alive helper and
            before it takes a task: where to start threads of your own (a metrics server, say), as a
            thread already running then would keep the helper from forking (see
            `--keep-alive-timeout`).
        sweep_interval: Seconds between sweeps of its queues (default 15), the first one interval
            in: each requeues the tasks of dead workers (whose keep-alive lapsed), counts their
            crashes and tops up missing notifications, as `Sweeper` does. Workers and sweepers claim
            each sweep of a queue first (`SweeperOps.claim_sweep`), so a queue is swept at most once
            per interval however many serve it. With `burst`, the worker also sweeps its queues
            before it decides they are empty. 0 turns sweeping off.
        max_crashes: A sweep dead-letters a task once workers died holding it more often than this
            (default 3); 0 counts no crashes, as the sweeper's `max_crashes`.
        dequeue_timeout: Seconds an idle worker blocks waiting for a notification (default 1), as
            go-delayed's workers do; a stop is seen at the latest once it ends.
        keep_alive_timeout: Seconds the worker's keep-alive keys live without a refresh (default 60,
            as `--keep-alive-timeout`): once they lapse, a sweeper takes the worker for dead and
            requeues its tasks, so a worker frozen longer than this loses them to another.
        weights: Instead of strict priority, one whole number of 1 or more per queue, in the queues'
            order (`[6, 1]`): each claim tries the queues in a random order drawn by weight, so while
            they all have tasks each queue gets about its weight's share of the claims (6 in 7 and 1
            in 7), and none starves. A claim takes up to `batch` tasks from the queue drawn first, so
            the shares hold over many claims, not within one. Default: None, strict priority.

    Raises:
        TypeError: No `allow`, or an item of it that is not a module name, a module or a function; an
            item of `middleware` that is not a `delayed.Middleware`.
        ImportError: A module name in `allow` that cannot be imported.
        ValueError: `batch` or `threads` under 1; `sweep_interval` negative or not finite;
            `dequeue_timeout` or `keep_alive_timeout` not a positive number of seconds; no queue, a
            queue named twice, or queues on different Redis servers (the worker waits on them with one
            `BLPOP`); `weights` that are not one whole number of 1 or more per queue.

    Attributes:
        lifecycle (Lifecycle): Where the worker is: `lifecycle.state` is `"starting"`, `"online"`,
            `"draining"` or `"offline"`. `stop()`, the stop signals `run()` takes, and every loop go
            through it.
        queues (list[Queue]): The queues, in priority order (or in the order of `weights`).
        weights (tuple[int, ...] | None): The queues' weights, or None for strict priority.
        queue (Queue): The first queue.
        middleware (list[Middleware]): Those given, then `observe`'s, in the order they run.

    Example:
        ```python title="tasks.py"
        def add(a, b):
            return a + b
        ```

        ```python
        from delayed import Queue, Worker, connect

        worker = Worker(Queue("default", connect()), allow=["tasks"], threads=4, burst=True)
        worker.run()  # until the queue is empty; without burst, until SIGTERM, SIGINT or SIGHUP
        ```
    """

    def __init__(
        self,
        queue: Union[Queue, Sequence[Queue]],
        allow: Union[None, Allowlist, Iterable[Allowed]] = None,
        keep_alive_interval: Optional[float] = None,
        batch: int = DEFAULT_BATCH,
        time_limit: Optional[float] = None,
        threads: int = 1,
        observe: Optional[Observer] = None,
        burst: bool = False,
        log_tasks: bool = False,
        on_online: Optional[Callable[[], Any]] = None,
        sweep_interval: float = DEFAULT_SWEEP_INTERVAL,
        max_crashes: int = DEFAULT_MAX_CRASHES,
        dequeue_timeout: float = DEFAULT_DEQUEUE_TIMEOUT,
        keep_alive_timeout: float = DEFAULT_KEEP_ALIVE_TIMEOUT,
        middleware: Sequence[Public] = (),
        weights: Optional[Sequence[int]] = None,
    ) -> None:
        if allow is None:
            raise TypeError(
                "Worker needs allow=[...]: the modules or functions its tasks may call "
                "(keakon/delayed 1.x called whatever a task named)"
            )
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        if not 0 <= sweep_interval < float("inf"):
            raise ValueError(f"sweep_interval must be 0 (no sweeps) or a number of seconds, got {sweep_interval}")
        for name, seconds in (("dequeue_timeout", dequeue_timeout), ("keep_alive_timeout", keep_alive_timeout)):
            if not 0 < seconds < float("inf"):
                raise ValueError(f"{name} must be a positive number of seconds, got {seconds}")
        if keep_alive_interval is None:
            keep_alive_interval = keep_alive_timeout / 4
        self.queues = [queue] if isinstance(queue, Queue) else list(queue)
        if not self.queues:
            raise ValueError("a worker needs at least one queue")
        if len({queue.name for queue in self.queues}) < len(self.queues):
            raise ValueError(f"a queue is named twice: {', '.join(queue.name for queue in self.queues)}")
        if len({server_of(queue) for queue in self.queues}) > 1:
            raise ValueError("a worker's queues must be on one Redis (it waits on them with one BLPOP)")
        self.queue = self.queues[0]
        self.allowlist = allow if isinstance(allow, Allowlist) else Allowlist(allow)
        self.keep_alive_interval = keep_alive_interval
        self.time_limit = time_limit
        self._max_batch = batch
        self._batch = 1
        self.lifecycle = Lifecycle("worker")
        self.threads = threads
        self.observe = observe
        self.burst = burst
        self.log_tasks = log_tasks
        self.on_online = on_online
        self._sweeps = Sweeps(logger, sweep_interval, max_crashes) if sweep_interval else None
        # threaded: a task per slot, and as many again waiting ready for one (see Lookahead)
        capacity = batch if threads == 1 else 2 * threads
        self.holdings = Holdings(self.queues, capacity, self.lifecycle, dequeue_timeout, keep_alive_timeout, weights)
        self.weights = self.holdings.weights
        self.middleware = [*middleware, *([] if observe is None else [Observe(observe)])]
        hooks = CallHooks(self.middleware)
        self._cancels = Cancels()
        self._invoker = (HookedInvoker(threads > 1, self._cancels, hooks) if hooks.wrappers
                         else Invoker(threads > 1, self._cancels))
        self._pipeline = Pipeline(self._middleware(hooks))
        self._claimed: Optional[Batch[Claim]] = None  # the one-slot runner's batch, with its watcher

    @property
    def id(self) -> Optional[str]:
        """The worker's main id, None before it goes online; its other ids are this id with -1, -2, ... appended."""
        return self.holdings.id

    @property
    def ids(self) -> List[str]:
        """Every id the worker holds tasks under, on every queue."""
        return self.holdings.ids

    def run(self, handle_signals: bool = True) -> int:
        """Work until stopped; then finish the task at hand, go offline and return the exit status.

        Going online takes fresh ids and forks the keep-alive helper. Once `stop()` is called (or a stop
        signal comes), the worker settles the task it is running (with `threads` > 1, lets the running
        ones finish), gives back the claimed tasks it has not started, and goes offline.

        Args:
            handle_signals: In the main thread, take the stop signals while running: SIGTERM, SIGINT and
                SIGHUP call `stop()`, and a second one exits the process at once with status 128 +
                signal. The previous handlers are restored on return. Elsewhere, or with False, only
                `stop()` stops the worker.

        Returns:
            The exit status: 0 (a forced stop exits the process instead).
        """
        return self.lifecycle.run(self._run, handle_signals)

    def _run(self) -> None:
        if not self.holdings.go_online():
            return  # stopped before Redis could be reached
        self.lifecycle.online()
        # forked first, before this worker starts threads of its own
        keep_alive = KeepAlive(self.keep_alive_interval, self.holdings.keep_alive, f"keep-alive of {self.id}",
                               self.holdings.outage)
        mover = Every(MOVE_DUE_INTERVAL, lambda: move_due_tasks(self.queues), "move due tasks", self.holdings.outage)
        sweeper = None if self._sweeps is None else Every(self._sweeps.interval, self._sweep, "sweep",
                                                          self.holdings.outage)
        noter = Every(NOTE_AFTER, self.holdings.note_claims, "note long claims", self.holdings.outage)
        listening = Listening(self.queues, self._cancels, self.holdings.outage)
        keep_alive.start()
        mover.start()
        noter.start()
        listening.start()
        if sweeper is not None:
            sweeper.start()
        listening.tried.wait()  # listening before it claims (unless Redis failed: it listens once back)
        them = "them" if len(self.queues) > 1 else "it"
        logger.info("worker %s online on %s %s, %d allowed functions; %s", self.id,
                    "queues" if len(self.queues) > 1 else "queue", ", ".join(
                        repr(queue.name) + ("" if self.weights is None else f" (weight {self.weights[index]})")
                        for index, queue in enumerate(self.queues)),
                    len(self.allowlist), f"sweeping {them} every {self._sweeps.interval:g} s: {self._sweeps.describe()}"
                    if self._sweeps else f"not sweeping {them} (sweep interval 0)")
        try:
            if self.on_online is not None:
                self.on_online()
            if self.threads > 1:
                self._work_concurrently()
            else:
                while not self.lifecycle.stopping:
                    if not self.work_once() and self.burst and self._burst_done():
                        self.lifecycle.stop()
            self.holdings.flush()
        finally:
            if sweeper is not None:
                sweeper.stop()
            mover.stop()
            noter.stop()
            listening.stop()
            keep_alive.stop()
            self._invoker.loop.close()
            if self._claimed is not None:
                self._claimed.close()
            self.holdings.go_offline()

    def stop(self) -> None:
        """Ask the worker to stop after the current task.

        Call it from any thread, but not from a signal handler: `run()` takes the stop signals itself.
        """
        self.lifecycle.stop()

    def work_once(self) -> int:
        """One round of the loop `run()` repeats with one thread: claim a batch, or wait for one task, and run it.

        The finished tasks of the last batch are released in the same round trip as the claim. Once a task
        has run longer than 20 ms, the claimed tasks behind it go back to the queue. A claim with nothing
        to take waits up to `dequeue_timeout` seconds (not with `burst`).

        Returns:
            How many tasks ran.
        """
        if self._claimed is None:
            self._claimed = Batch(self.holdings.give_back, BATCH_TIME)
            self.lifecycle.on_stop(self._claimed.stop)  # a stop starts none of the claimed tasks left
        claims = self.holdings.claim(self._batch, block=not self.burst)
        started = time.monotonic()
        self._claimed.load(claims)
        ran = 0
        while True:
            claim = self._claimed.next()
            if claim is None:
                break
            claim.holding.settle(claim, self._execute(Run(claim.blob, claim.holding.queue, claim.worker_id)))
            ran += 1
        if self.lifecycle.stopping:
            self.holdings.give_back(self._claimed.rest())
        self.holdings.unlock()
        self._adapt_batch(len(claims), time.monotonic() - started)
        return ran

    def _work_concurrently(self) -> None:
        """Keep up to self.threads tasks running until stopped, then let the running ones finish.

        A few claimed tasks wait ready for the next free slot (see Lookahead), so a slot that frees
        starts one at once and the claim's round trip overlaps the running tasks; the ready ones
        that no slot takes within BATCH_TIME go back to the queue (the Batch's watcher).
        """
        held: Dict[Any, Claim] = {}

        def give_back(jobs: List[Job]) -> None:
            self.holdings.give_back([held.pop(job.key) for job in jobs])

        ready: Batch[Job] = Batch(give_back, BATCH_TIME)
        slots = Slots(self.threads, ready, self._invoker)
        lookahead = Lookahead(self.threads, BATCH_TIME)
        try:
            while not self.lifecycle.stopping:
                self._settle_finished(slots, held, lookahead)
                slots.fill()
                wanted = slots.free + lookahead.ahead(ready.given_back) - ready.waiting
                if wanted > 0:
                    block = slots.free > 0 and not ready.waiting  # a free slot and nothing ready
                    idle = not slots.running and not ready.waiting
                    claims = self.holdings.claim(wanted, block=block and not (self.burst and idle),
                                                timeout=self._claim_timeout(slots, lookahead))
                    if not claims and idle and self.burst and self._burst_done():
                        break
                    ready.load(self._jobs(claims, held), starting_now=slots.free)
                    slots.fill()
                    if slots.free or len(claims) == wanted:
                        continue
                slots.wait(POLL)  # every slot busy and as many ready as the queue had
            give_back(ready.rest())
            while slots.running:  # draining: the running tasks finish and are settled
                slots.fill()  # (a job a coroutine took just before the give-back: it is held, so it runs)
                slots.wait(POLL)
                self._settle_finished(slots, held, lookahead)
        finally:
            slots.close()
            ready.close()

    def _sweep(self, now: bool = False) -> int:
        """Sweep the queues no one swept within the sweep interval (with now, all of them); the
        notifications pushed (0 with sweeping off)."""
        return self._sweeps.sweep(self.queues, now) if self._sweeps else 0

    def _burst_done(self) -> bool:
        """With burst, after a claim that found nothing: True (said once) unless a due scheduled task
        was just moved into a queue, a sweep now put a dead worker's task back, or Redis is failing
        (then it is not known to be empty)."""
        try:
            if self.holdings.failing or move_due_tasks(self.queues) or self._sweep(now=True):
                return False
        except redis.RedisError:
            return False
        logger.info("worker %s: burst done, its queues are empty; stopping", self.id)
        return True

    @staticmethod
    def _claim_timeout(slots: Slots, lookahead: Lookahead) -> Optional[float]:
        """How long a claim may block on an empty queue: idle, dequeue_timeout (None); with tasks running,
        until the next one should have finished (its release rides on the next claim), at most POLL."""
        if not slots.running:
            return None
        if lookahead.mean is None:
            return POLL
        now = time.monotonic()
        expected = [(job.run.started or now) + FINISH_SLACK * lookahead.mean for job in list(slots.running.values())]
        soonest = min((at for at in expected if at > now), default=now + POLL)
        return min(POLL, max(MIN_POLL, soonest - now))

    def _jobs(self, claims: List[Claim], held: Dict[Any, Claim]) -> List[Job]:
        """The claimed tasks as jobs to run, now held; the ones refused before their call are settled at once."""
        jobs = []
        pipeline = self._pipeline
        for claim in claims:
            run = Run(claim.blob, claim.holding.queue, claim.worker_id)
            if not pipeline.start(run):
                claim.holding.settle(claim, pipeline.finish(run))
                continue
            held[claim.worker_id] = claim
            jobs.append(Job(claim.worker_id, run))
        return jobs

    def _settle_finished(self, slots: Slots, held: Dict[Any, Claim], lookahead: Lookahead) -> None:
        for job in slots.collect():
            claim = held.pop(job.key)
            claim.holding.settle(claim, self._pipeline.finish(job.run))
            lookahead.finished(job.run.seconds)
        self.holdings.unlock()
        slots.enforce_limits(self._warn_overrun)

    @staticmethod
    def _warn_overrun(job: Job, overrun: float) -> None:
        assert job.run.task is not None
        logger.warning("task %s runs %.1f s past its time limit of %g s: a thread cannot be killed, so it "
                       "stays held (its keep-alive goes on) and keeps its slot; interrupting it again",
                       job.run.task.func_path, overrun, job.limit)

    def _adapt_batch(self, claimed: int, elapsed: float) -> None:
        if elapsed > BATCH_TIME:
            self._batch = max(1, self._batch // 2)
        elif claimed == self._batch:
            self._batch = min(self._max_batch, self._batch * 2)

    def execute(self, blob: bytes, queue: Optional[Queue] = None) -> Settlement:
        """Run the task in a blob here, if it may run, and say how to settle it; never raises for a task's fault.

        Nothing is sent to Redis: the settlement (a release, a retry, a dead letter) is returned, not
        applied, and a task's limits are not asked (nothing is claimed). For tests of what a worker
        does with a blob.

        Args:
            blob: The task's blob.
            queue: The queue it was claimed from, whose `max_task_size` applies; default: the first.

        Returns:
            How to settle it.
        """
        return self._execute(Run(blob, queue or self.queue))

    def _execute(self, run: Run) -> Settlement:
        """execute() of a Run: the one-slot worker's call of each task it claimed."""
        pipeline = self._pipeline
        if pipeline.start(run):
            self._invoker.invoke(run)
        return pipeline.finish(run)

    def _middleware(self, hooks: CallHooks) -> List[Middleware]:
        """The worker's own middleware, outermost first, with the hooks of yours in their places (see
        delayed.worker.middleware for what each does)."""
        log: List[Middleware] = [TaskLog()] if self.log_tasks else []
        after: List[Middleware] = [AfterCall(hooks)] if hooks.after else []
        before: List[Middleware] = [BeforeCall(hooks)] if hooks.before else []
        return [*log, *after, Tracking(), Retries(self.allowlist.resolve, lambda: self.id), Expiry(),
                CallCheck(self.allowlist), TimeLimit(self.time_limit), Limits(self.holdings.admit), *before]
