"""TaskOptions: every task option's name, type, default, validation and place on the wire, in one place.

A task's options are of three kinds, told apart by each field's `Place`:
- carried in its blob (`max_retries`, `backoff`, `time_limit`, and the state delayed writes as the
  task moves: `attempt`, `crashes`, `unique_key`, `unique_token` and a tracked task's `id`), in the
  map that is a PyTask blob's fifth element and a GoTask blob's third (see delayed.wire.task);
- carried in the blob's array (`retry`, keakon/delayed 1.x's fourth element: PyTasks only);
- used at enqueue only (`delay`, `at`, `unique_for`, `result_ttl`): how the task goes in.
`PyTask`, `GoTask`, `Queue.enqueue`, the `delayed()` decorator and `delayed enqueue` all take them by
these names, and `TaskOptions` checks each value as it is made: a value no option may have raises a
`ValueError` (a `TypeError` for the wrong type) naming the option.

Adding an option: a field here (with its `Place`, check and help), then the worker code that acts on
it; docs/development.md says which test proves it reaches the worker.
"""
import dataclasses
import datetime
import enum
import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple, Union

MAX_SECONDS = 10 * 366 * 86400
"""The longest delay, time limit, lock or record lifetime an option may ask for: ten years (longer is a
mistake, such as milliseconds given as seconds, not a plan; 1e308 would never come due)."""
MAX_COUNT = 2 ** 31 - 1
"""The most retries or attempts an option may count (msgpack and Go's int32 both hold it)."""
FOREVER = -1
"""`retry=-1`: retry forever (keakon/delayed 1.x's meaning)."""
_HEX_ID = re.compile(r"[0-9a-f]{32}")
_FUNC_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


class Place(enum.Enum):
    """Where an option lives."""

    MAP = "map"
    """In the blob's options map, under the field's name: what the worker acts on."""
    ARRAY = "array"
    """In the blob's array itself (keakon's `retry`)."""
    ENQUEUE = "enqueue"
    """Nowhere in the blob: it says how the task is enqueued."""


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds, got {value!r}")
    return value


def seconds(minimum_exclusive: bool) -> Callable[[str, Any], float]:
    """A check for seconds: finite, at most MAX_SECONDS, above 0 (minimum_exclusive) or 0 and above."""
    def check(name: str, value: Any) -> float:
        number = _number(name, value)
        if number < 0 or (minimum_exclusive and number == 0):
            above = "above 0" if minimum_exclusive else "0 or more"
            raise ValueError(f"{name} must be {above} seconds, got {value!r}")
        if number > MAX_SECONDS:
            raise ValueError(f"{name} must be at most {MAX_SECONDS} seconds (ten years), got {value!r}")
        return number
    return check


def count(minimum: int) -> Callable[[str, Any], int]:
    """A check for a whole number from minimum to MAX_COUNT."""
    def check(name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be a whole number, got {value!r}")
        if not minimum <= value <= MAX_COUNT:
            low = "-1 (forever)" if minimum == FOREVER else str(minimum)
            raise ValueError(f"{name} must be from {low} to {MAX_COUNT}, got {value!r}")
        return value
    return check


def text(pattern: Optional["re.Pattern[str]"] = None, what: str = "a non-empty string") -> Callable[[str, Any], str]:
    """A check for a string: non-empty, or matching pattern (what says which)."""
    def check(name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise TypeError(f"{name} must be {what}, got {value!r}")
        if not value or (pattern is not None and not pattern.fullmatch(value)):
            raise ValueError(f"{name} must be {what}, got {value!r}")
        return value
    return check


def backoff(name: str, value: Any) -> Union[float, str]:
    """seconds (0 or more), or the "module:func" path of a function of the attempt number."""
    if isinstance(value, str):
        return text(_FUNC_PATH, "seconds or a 'module:func' path")(name, value)
    return seconds(False)(name, value)


def moment(name: str, value: Any) -> datetime.datetime:
    """A datetime (naive: local time) at most MAX_SECONDS from now; one past means now."""
    if not isinstance(value, datetime.datetime):
        raise TypeError(f"{name} must be a datetime, got {value!r}")
    if value.timestamp() - time.time() > MAX_SECONDS:
        raise ValueError(f"{name} must be at most ten years from now, got {value.isoformat()}")
    return value


_RATE = re.compile(r"([1-9][0-9]*)/(s|m|h)")
RATE_PERIODS = {"s": 1, "m": 60, "h": 3600}
"""A rate_limit's periods: "100/m" admits at most 100 starts in any 60 seconds."""


def rate(name: str, value: Any) -> str:
    """A rate limit: "N/s", "N/m" or "N/h" (N from 1 to MAX_COUNT)."""
    checked = text(_RATE, "'N/s', 'N/m' or 'N/h' with N a whole number above 0")(name, value)
    count_of(checked)
    return checked


def count_of(rate_limit: str) -> Tuple[int, int]:
    """A rate_limit's count and period in seconds: "100/m" is (100, 60); ValueError past MAX_COUNT."""
    number, unit = rate_limit.split("/")
    if int(number) > MAX_COUNT:
        raise ValueError(f"rate_limit must count at most {MAX_COUNT} starts, got {rate_limit!r}")
    return int(number), RATE_PERIODS[unit]


def expiry(name: str, value: Any) -> Union[float, datetime.datetime]:
    """Seconds from the enqueue (above 0), or an aware datetime at most ten years from now."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise ValueError(f"{name} must be seconds or an aware datetime (with its time zone), got "
                             f"{value.isoformat()}")
        return moment(name, value)
    return seconds(True)(name, value)


def epoch(name: str, value: Any) -> float:
    """A unix time: a finite number above 0."""
    number = _number(name, value)
    if number <= 0:
        raise ValueError(f"{name} must be a unix time above 0, got {value!r}")
    return number


def string_map(name: str, value: Any) -> Dict[str, str]:
    """A map of strings to strings (what tracing carries: traceparent, baggage)."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError(f"{name} must be a map of strings to strings, got {value!r}")
    if not value:
        raise ValueError(f"{name} must not be empty")
    return dict(value)


def _float_or_datetime(text: str) -> Union[float, datetime.datetime]:
    try:
        return float(text)
    except ValueError:
        return datetime.datetime.fromisoformat(text)


def _float_or_text(text: str) -> Union[float, str]:
    try:
        return float(text)
    except ValueError:
        return text


_METAVARS: Dict[Callable[[str], Any], str] = {int: "N", float: "SECONDS", str: "TEXT"}


def _option(place: Place, check: Callable[[str, Any], Any], help: str, parse: Callable[[str], Any] = str,
            default: Any = None, public: bool = True, metavar: Optional[str] = None) -> Any:
    """A TaskOptions field: its default, and in its metadata where it lives, its check, its help and
    how a command line's text becomes its value (`delayed enqueue --max-retries 5`). public=False:
    state delayed writes itself."""
    return field(default=default, metadata={"place": place, "check": check, "help": help, "parse": parse,
                                            "public": public, "metavar": metavar or _METAVARS.get(parse, "VALUE")})


@dataclass(frozen=True, repr=False)
class TaskOptions:
    """How a task runs and how it is enqueued: every option a task takes, checked as it is made.

    Give them by name to `PyTask`, `GoTask`, `Queue.enqueue`, the `delayed()` decorator or
    `delayed enqueue` (`--max-retries 5`): the same names everywhere. An option left out keeps its
    default; one given to `enqueue` wins over the task's own.

    Args:
        retry: More runs after the task raises, requeued at once; -1 retries forever, each retry
            waiting 0.1 s, 0.2 s, 0.4 s ... up to 60 s (keakon/delayed 1.x's option; PyTasks only).
        max_retries: Retry with backoff instead: up to this many more runs after it raises, each
            waiting in the scheduled set first.
        backoff: With `max_retries`, the wait before each next attempt: seconds, or (PyTasks only) the
            `"module:func"` path of an allowed function of the attempt number (1, 2, ...) that returns seconds. Default:
            Sidekiq's curve with jitter (16-35 s after the first failure, about 5 minutes after the fourth).
        time_limit: Seconds the call may run before the worker fails it; wins over the worker's.
        delay: Seconds to wait before the task is due.
        at: When the task is due (a naive datetime is local time); one already past means now. Give
            `delay` or `at`, not both.
        unique_for: Refuse, with `DuplicateTaskError`, an identical task (same function, arguments and
            options) while this one is queued, waiting for a retry, or running; the lock goes when the
            task ends, and in any case after this many seconds.
        unique_key: With `unique_for`: every task with this key is a duplicate, whatever its call.
        result_ttl: Track the task: its status and result are kept this many seconds (rounded up) after
            it ended, and `enqueue` returns its handle.
        expires: Seconds from the enqueue, or an aware datetime: a task not started by then never runs,
            and goes to the dead letters with reason `expired` (the enqueue writes the moment into the
            blob as `expires_at`).
        rate_limit: Start at most N of the tasks sharing its `limit_key` in any second, minute or hour,
            across every worker of the queue, Python and Go: `"100/m"`. A task over the limit waits,
            out of the queue, for its turn.
        concurrency_limit: Run at most this many of the tasks sharing its `limit_key` at once, across
            every worker of the queue.
        limit_key: What the limits count: the tasks of the queue with the same key (default: the
            function's path); one customer's id, say.
        headers: Strings to strings carried in the blob to the worker and its middleware, as tracing's
            `traceparent`.

    Raises:
        ValueError: A value the option cannot take (NaN, infinite, negative, out of range), naming it.
        TypeError: A value of the wrong type, naming the option; an unknown option.

    Example:
        ```python
        from delayed import PyTask, TaskOptions

        options = TaskOptions(max_retries=5, time_limit=30)
        task = PyTask("tasks:add", [1, 2], options=options)
        print(task.options.max_retries)  # 5
        ```
    """

    retry: int = _option(Place.ARRAY, count(FOREVER), "runs after a failure, requeued at once; -1: forever "
                         "(default: 0)", int, default=0)
    max_retries: Optional[int] = _option(Place.MAP, count(0), "retry with backoff: up to this many more runs", int)
    backoff: Union[None, float, str] = _option(
        Place.MAP, backoff, "with --max-retries: seconds before each retry, or the MODULE:FUNC of a function of "
        "the attempt that returns them", _float_or_text, metavar="SECONDS|MODULE:FUNC")
    time_limit: Optional[float] = _option(Place.MAP, seconds(True), "seconds the call may run before it is failed",
                                          float)
    delay: Optional[float] = _option(Place.ENQUEUE, seconds(False), "seconds to wait before it is due", float)
    at: Optional[datetime.datetime] = _option(Place.ENQUEUE, moment, "when it is due: an ISO 8601 time "
                                              "(2026-12-01T09:00:00+00:00; without an offset, local time)",
                                              datetime.datetime.fromisoformat, metavar="TIME")
    unique_for: Optional[float] = _option(
        Place.ENQUEUE, seconds(True), "refuse an identical task while this one waits or runs, for at most this "
        "many seconds", float)
    unique_key: Optional[str] = _option(Place.MAP, text(), "with --unique-for: the lock's key, whatever the call",
                                        metavar="KEY")
    result_ttl: Optional[float] = _option(
        Place.ENQUEUE, seconds(True), "track it (prints its id, for `delayed task ID`): its record is kept this "
        "long after it ended", float)
    expires: Union[None, float, datetime.datetime] = _option(
        Place.ENQUEUE, expiry, "seconds from the enqueue, or an ISO 8601 time with its offset: not started by "
        "then, it never runs (dead letter, reason expired)", _float_or_datetime, metavar="SECONDS|TIME")
    rate_limit: Optional[str] = _option(Place.MAP, rate, "start at most N in any second, minute or hour, across "
                                        "every worker: N/s, N/m or N/h", metavar="N/s|N/m|N/h")
    concurrency_limit: Optional[int] = _option(Place.MAP, count(1), "run at most N at once, across every worker",
                                               int)
    limit_key: Optional[str] = _option(Place.MAP, text(), "what rate_limit and concurrency_limit count (default: "
                                       "the function's path)", metavar="KEY")
    headers: Optional[Mapping[str, str]] = _option(Place.MAP, string_map, "strings carried to the worker (tracing's "
                                                   "traceparent): a JSON object", json.loads, metavar="JSON")
    expires_at: Optional[float] = _option(Place.MAP, epoch, "the unix time past which it never starts", float,
                                          public=False)
    attempt: int = _option(Place.MAP, count(0), "runs of it that failed, with max_retries", int, default=0,
                           public=False)
    crashes: int = _option(Place.MAP, count(0), "times our workers died holding it (see --max-crashes)", int,
                           default=0, public=False)
    unique_token: Optional[str] = _option(Place.MAP, text(), "its hold on the unique lock", public=False)
    id: Optional[str] = _option(Place.MAP, text(_HEX_ID, "32 hex digits"), "a tracked task's id", public=False)
    unknown: Mapping[str, Any] = field(default_factory=dict, compare=True)
    """Options a newer producer wrote that this version does not know: carried along, untouched."""

    def __post_init__(self) -> None:
        for name, value in self._given():
            checked = _FIELDS[name].metadata["check"](name, value)
            if checked is not value:
                object.__setattr__(self, name, checked)
        if self.delay is not None and self.at is not None:
            raise ValueError("give delay or at, not both")
        if isinstance(self.expires, (int, float)) and self.delay is not None and self.expires <= self.delay:
            raise ValueError(f"expires={self.expires!r} is not after delay={self.delay!r}: the task would expire "
                             "before it is due")
        if self.limit_key is not None and self.rate_limit is None and self.concurrency_limit is None:
            raise ValueError("limit_key needs rate_limit or concurrency_limit: the key says which tasks share "
                             "a limit, the limit how many")
        if self.unique_key is not None and self.unique_for is None and self.unique_token is None:
            raise ValueError("unique_key needs unique_for: the lock's key says which tasks are duplicates, "
                              "unique_for how long")

    def __repr__(self) -> str:
        return f"TaskOptions({', '.join(f'{name}={value!r}' for name, value in self.given().items())})"

    def _given(self) -> Iterator[Tuple[str, Any]]:
        """The options that differ from their defaults, as (name, value)."""
        for name in _NAMES:
            value = getattr(self, name)
            default = _FIELDS[name].default
            if value is not None and not (type(value) is type(default) and value == default):
                yield name, value

    def replace(self, **changes: Any) -> "TaskOptions":
        """These options with some changed (each checked; None restores an option's default)."""
        changes = {name: _FIELDS[name].default if value is None and name in _FIELDS else value
                   for name, value in changes.items()}
        return dataclasses.replace(self, **changes)

    def merged(self, winner: "TaskOptions") -> "TaskOptions":
        """These options with those set in winner winning (a due time given there replaces this one's,
        `delay` or `at` alike): what enqueue does with the task's own options and those it is given."""
        changes = self.overrides(winner)
        return self.replace(**changes) if changes else self

    @staticmethod
    def overrides(winner: "TaskOptions") -> Dict[str, Any]:
        """The changes (for `replace`, or a task's `with_options`) that make options merged with winner:
        the options set in winner, and a due time given there clears the other (`delay` or `at`)."""
        changes = winner.given()
        if "delay" in changes or "at" in changes:
            changes.setdefault("delay", None)
            changes.setdefault("at", None)
        return changes

    def given(self, place: Optional[Place] = None) -> Dict[str, Any]:
        """The options set (not at their defaults), in field order; only those in place, if given."""
        return {name: value for name, value in self._given()
                if place is None or _FIELDS[name].metadata["place"] is place}

    def wire_map(self) -> Dict[str, Any]:
        """The blob's options map: the MAP options set and the unknown ones; a tracked task's id last,
        so its blob ends with TRACKED_TAIL and the id (see delayed.wire.task)."""
        carried = self.given(Place.MAP)
        carried.update(self.unknown)
        if self.id is not None:
            carried[ID_OPTION] = carried.pop(ID_OPTION)
        return carried

    @classmethod
    def from_wire(cls, carried: Mapping[str, Any], retry: int = 0) -> "TaskOptions":
        """The options of a decoded blob: its map (string keys) and its retry; ValueError/TypeError as
        for the constructor. Keys this version does not know go to `unknown`.

        A worker's hot path: each value carried is checked by its option's check, and nothing else is
        done (the constructor's checks across options concern what a producer gives, not what it wrote).
        """
        values = dict(_DEFAULTS)
        unknown = {}
        for name, value in carried.items():
            check = _WIRE_CHECKS.get(name)
            if check is None:
                unknown[name] = value
            else:
                values[name] = check(name, value)
        if retry:
            values["retry"] = _RETRY_CHECK("retry", retry)
        values["unknown"] = unknown
        options = cls.__new__(cls)
        options.__dict__.update(values)  # frozen: set once, here, as dataclasses' own __init__ would
        return options


ID_OPTION = "id"
"""The option a tracked task's id rides in (see delayed.wire.tracking)."""
CRASHES_OPTION = "crashes"
"""How many times our workers died holding the task: the sweeper adds one as it requeues it, and
dead-letters it past its --max-crashes (see SweeperOps.sweep)."""
_FIELDS = {item.name: item for item in dataclasses.fields(TaskOptions) if "place" in item.metadata}
_NAMES = tuple(_FIELDS)
_DEFAULTS = {name: item.default for name, item in _FIELDS.items()}
_WIRE_CHECKS = {name: item.metadata["check"] for name, item in _FIELDS.items() if item.metadata["place"] is Place.MAP}
_RETRY_CHECK = _FIELDS["retry"].metadata["check"]
PUBLIC = tuple(name for name, item in _FIELDS.items() if item.metadata["public"])
"""The options users give (the rest is state delayed writes as the task moves)."""
NO_OPTIONS = TaskOptions()
"""The options of most tasks: none set."""


def help_of(name: str) -> Tuple[str, str]:
    """An option's help line and metavar, for the CLI."""
    return str(_FIELDS[name].metadata["help"]), str(_FIELDS[name].metadata["metavar"])


def from_text(name: str, text: str) -> Any:
    """An option's value from a command line's text, checked: ValueError (naming the option) if the text
    is not one."""
    try:
        value = _FIELDS[name].metadata["parse"](text)
    except ValueError:
        raise ValueError(f"{name} cannot be {text!r}") from None
    try:
        return _FIELDS[name].metadata["check"](name, value)
    except TypeError as exc:
        raise ValueError(str(exc)) from None


def place_of(name: str) -> Place:
    """Where an option lives."""
    return _FIELDS[name].metadata["place"]


def expires_at(options: TaskOptions, now: float) -> Optional[float]:
    """The unix time past which a task with these options never starts: its `expires` from now (the
    enqueue), None without one."""
    if options.expires is None:
        return None
    if isinstance(options.expires, datetime.datetime):
        return options.expires.timestamp()
    return now + options.expires


def make(**given: Any) -> TaskOptions:
    """TaskOptions from keywords, each None meaning "not given"; a misspelled option is a TypeError
    naming it and the options there are."""
    unknown = sorted(set(given) - set(PUBLIC))
    if unknown:
        raise TypeError(f"unknown task option {unknown[0]!r}; the options are: {', '.join(PUBLIC)}")
    return TaskOptions(**{name: value for name, value in given.items() if value is not None})
