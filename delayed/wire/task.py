"""Task blobs, byte-compatible with keakon/delayed 1.x and go-delayed.

PyTask: msgpack array [func_path, args, kwargs, retry], trailing defaults dropped
the way keakon/delayed drops them (retry 0, then empty kwargs, then empty args);
go-delayed's NewPyTask writes [func_path, args|nil, kwargs|nil], which decodes too.
The options a worker acts on (see delayed.wire.options.TaskOptions: time_limit, max_retries, backoff,
attempt, unique_key, unique_token, crashes, and a tracked task's id) ride in a fifth element, a map,
written only when set: keakon/delayed 1.x cannot read such a blob, so a task without options stays
byte-identical (until one of our workers dies holding it: the sweeper then counts the crash in it).
A tracked task's id (32 hex digits) is always the map's last entry, so the blob starts with
WITH_OPTIONS and ends with TRACKED_TAIL and the id: scripts find it there without decoding the blob
(Redis's cmsgpack cannot read msgpack bin, which bytes arguments are).
GoTask: msgpack array [func_path, payload] where payload is a bin holding the
msgpack of the argument, exactly what go-delayed's NewGoTask(func_path, arg...)
writes: one argument as itself, several as an array, none as msgpack nil.
go-delayed's NewGoTask(func_path, nil) writes [func_path, nil]: that decodes as a GoTask too.
A GoTask's options ride in a third element, the same map: [func_path, payload, options], the payload
then always a bin, which tells it from go-delayed's NewPyTask(func_path, nil, kwargs) (nil, or an
array, where a GoTask has its bin). go-delayed's decoder skips array elements past its two fields, so
its workers run such a task, ignoring the options. A tracked GoTask's blob starts with GO_WITH_OPTIONS
and ends with TRACKED_TAIL and the id, as a PyTask's does (see carries_options).
"""
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import msgpack

from ..errors import MalformedTaskError, TaskArgumentError
from .ext import decode_ext
from .options import NO_OPTIONS, TaskOptions, make
from .preview import brief

FUNC_PATH_SEP = ":"
WITH_OPTIONS = b"\x95"
"""A PyTask blob with options starts so: a five-element msgpack array."""
GO_WITH_OPTIONS = b"\x93"
"""A GoTask blob with options starts so: a three-element msgpack array (as go-delayed's NewPyTask
does: the byte after the func path tells them apart, a bin marker for a GoTask's payload)."""
BIN_MARKERS = b"\xc4\xc5\xc6"
"""The first byte of a msgpack bin (bin8, bin16, bin32): a GoTask's payload. A PyTask's args are an
array or nil."""
TRACKED_TAIL = b"\xa2id\xd9\x20"
"""What comes before the id at the end of a tracked blob: the key "id" (fixstr), then a str8 of 32 bytes.
(protocol/lua/tracking.lua's track.key reads the same bytes: tests/test_task_options.py pins both.)"""
_GO_NO_ARGUMENT = msgpack.packb(None)  # go-delayed marshals its empty variadic slice as nil
_STR_HEADERS = {0xD9: 1, 0xDA: 2, 0xDB: 4}
"""The str8, str16 and str32 markers, and how many bytes of length follow each (fixstr: none)."""


def carries_options(blob: bytes) -> bool:
    """Whether a blob has the shape of a task with an options map, read from its first bytes without
    decoding it: a PyTask's five elements, or a GoTask's three, its func path followed by a bin. (A
    three-element PyTask, [func, args, kwargs], has an array or nil there, and its kwargs could end
    as a tracked blob does.) tracking.lua's track.key reads the same bytes."""
    first = blob[:1]
    if first == WITH_OPTIONS:
        return True
    if first != GO_WITH_OPTIONS or len(blob) < 2:
        return False
    marker = blob[1]
    if 0xA0 <= marker <= 0xBF:  # fixstr
        after = 2 + marker - 0xA0
    elif marker in _STR_HEADERS:
        size = _STR_HEADERS[marker]
        after = 2 + size + int.from_bytes(blob[2:2 + size], "big")
    else:
        return False
    return after < len(blob) and blob[after] in BIN_MARKERS


class Float32:
    """A number a GoTask writes as a msgpack float32, for a Go `float32` parameter or field.

    Python floats are float64 (msgpack `cb`), and go-delayed's msgpack refuses `cb` for a `float32`
    target: it logs and drops the task. Wrap such values, anywhere in a GoTask's arguments (inside
    lists and dicts too): `GoTask("main.F", Float32(1.5))`.

    Args:
        value: The number.

    Attributes:
        value (float): The number, as a Python float.
    """

    __slots__ = ("value",)

    def __init__(self, value: float) -> None:
        self.value = float(value)

    def __float__(self) -> float:
        return self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Float32) and self.value == other.value

    def __hash__(self) -> int:
        return hash((Float32, self.value))

    def __repr__(self) -> str:
        return f"Float32({self.value!r})"


def _pack_go_value(value: Any) -> bytes:
    """msgpack of a GoTask argument; values holding a Float32 take the slower walk below."""
    try:
        return msgpack.packb(value)
    except TypeError:
        return b"".join(_go_parts(value, msgpack.Packer(), msgpack.Packer(use_single_float=True)))


def _go_parts(value: Any, packer: msgpack.Packer, single: msgpack.Packer) -> Iterator[bytes]:
    """Pack value piece by piece with msgpack's own packers, Float32 leaves as float32."""
    if isinstance(value, Float32):
        yield single.pack(value.value)
    elif isinstance(value, (list, tuple)):
        yield packer.pack_array_header(len(value))
        for item in value:
            yield from _go_parts(item, packer, single)
    elif isinstance(value, dict):
        yield packer.pack_map_header(len(value))
        for key, item in value.items():
            yield from _go_parts(key, packer, single)
            yield from _go_parts(item, packer, single)
    else:
        yield packer.pack(value)


_UNPACKABLE = (TypeError, OverflowError)
"""What msgpack raises for a value it cannot write: a type it does not know, an int past 64 bits."""


def _unpackable(value: Any, where: str, float32: bool) -> Optional[Tuple[str, Any, Exception]]:
    """The first piece of value msgpack cannot write: (its path from where, itself, msgpack's error);
    None if there is none. float32: Float32 leaves are fine (a GoTask's)."""
    if isinstance(value, (list, tuple)):
        pieces: List[Tuple[str, Any]] = [(f"{where}[{index}]", item) for index, item in enumerate(value)]
    elif isinstance(value, dict):
        pieces = [piece for key, item in value.items()
                  for piece in ((f"a key of {where}", key), (f"{where}[{brief(key)}]", item))]
    elif float32 and isinstance(value, Float32):
        return None
    else:
        try:
            msgpack.packb(value)
        except _UNPACKABLE as exc:
            return where, value, exc
        return None
    return next(filter(None, (_unpackable(item, path, float32) for path, item in pieces)), None)


def _argument_error(func_path: str, arguments: Sequence[Tuple[str, Any]], float32: bool,
                    error: Exception) -> Exception:
    """What to raise for a task msgpack could not write: a TaskArgumentError naming the argument at
    fault, or msgpack's own error if none is (the fault lies elsewhere)."""
    for name, value in arguments:
        found = _unpackable(value, name, float32)
        if found is not None:
            where, culprit, exc = found
            kind = type(culprit)
            type_name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
            return TaskArgumentError(f"task {func_path}: {where} is of type {type_name}, which msgpack "
                                     f"cannot serialize ({exc})")
    return error


def func_path_of(func: Callable[..., Any]) -> str:
    """'module.path:name' for a module-level function, the way keakon/delayed names it."""
    module, name = getattr(func, "__module__", None), getattr(func, "__name__", None)
    qualname = getattr(func, "__qualname__", name)
    if not module or not name or not name.isidentifier() or qualname != name or module == "__main__":
        raise ValueError(
            f"{func!r} cannot be a task: use a function defined at the top level of an importable module"
        )
    return module + FUNC_PATH_SEP + name


def _options_of(options: Union[None, TaskOptions, Mapping[str, Any]], given: Dict[str, Any]) -> TaskOptions:
    """A task's options from its constructor's `options` (TaskOptions, or a blob's options map) and
    the options given by name, which win; each checked."""
    if options is None:
        base = NO_OPTIONS
    elif isinstance(options, TaskOptions):
        base = options
    else:
        base = TaskOptions.from_wire(options)
    if given:
        make(**given)  # names checked as the public entry points check them
        base = base.replace(**given)
    return base


def _unpack(blob: bytes) -> Any:
    try:
        return msgpack.unpackb(blob, raw=False, strict_map_key=False, ext_hook=decode_ext)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise MalformedTaskError(f"not a msgpack value ({detail})") from None


class PyTask:
    """A call of a Python function: its path, its arguments, and its options (how to retry it, ...).

    Its blob is keakon/delayed 1.x's: a msgpack array `[func_path, args, kwargs, retry]` with trailing
    defaults dropped as keakon drops them; go-delayed's `NewPyTask` writes one too. The options a
    worker acts on (`max_retries`, `backoff`, `time_limit`, and those of unique and tracked tasks)
    ride in a fifth element, written only when set: keakon/delayed 1.x cannot read such a blob. The
    options that say how it is enqueued (`delay`, `at`, `unique_for`, `unique_key`, `result_ttl`) stay
    with the task object, for `enqueue` to honour.

    A run that raises `SkipRetry`, or whose arguments do not fit the function, is not retried. A task
    out of retries goes to the dead letters (reason `failed`, or `timed_out`).

    Args:
        func: The function, or its path `"module.path:func"`. A function must be defined at the top
            level of an importable module (not `__main__`), and the worker must allow it.
        args: Positional arguments: a list or a tuple of values msgpack can write.
        kwargs: Keyword arguments: a dict with string keys.
        retry: How many more times to run the task after it raises, requeued at once (the `retry`
            option, positional as in keakon/delayed 1.x).
        options: A `TaskOptions` (or a blob's options map): the task's options.
        **given: Options by name, as `TaskOptions` takes them (`max_retries=5`, `time_limit=30`,
            `delay=10`, `result_ttl=3600`, ...); they win over `options`.

    Raises:
        ValueError: `func` is a function that is not at the top level of an importable module; an
            option's value it cannot take (NaN, negative, out of range), naming the option.
        TypeError: `args` is not a list or a tuple, `kwargs` is not a dict, an option of the wrong type
            or an unknown one.

    Attributes:
        func_path (str): The function's path, `"module.path:func"`.
        args (Sequence): The positional arguments (a list once decoded).
        kwargs (dict): The keyword arguments.
        retry (int): The retries left, as `retry` above.
        options (TaskOptions): The task's options.

    Example:
        ```python
        from delayed import PyTask, Queue, connect

        queue = Queue("default", connect())
        queue.enqueue(PyTask("tasks:send", ["ann@example.com"], {"subject": "hi"}, max_retries=5))
        ```
    """

    __slots__ = ("func_path", "args", "kwargs", "options", "_data")

    def __init__(
        self,
        func: Union[Callable[..., Any], str],
        args: Optional[Sequence[Any]] = None,
        kwargs: Optional[Dict[str, Any]] = None,
        retry: int = 0,
        *,
        options: Union[None, TaskOptions, Mapping[str, Any]] = None,
        **given: Any,
    ) -> None:
        func_path = func if isinstance(func, str) else func_path_of(func)
        if args is not None and not isinstance(args, (list, tuple)):
            raise TypeError(f"args must be a list or a tuple, not {type(args).__name__}")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise TypeError(f"kwargs must be a dict, not {type(kwargs).__name__}")
        if retry:
            given.setdefault("retry", retry)
        self._fill(func_path, args, kwargs, _options_of(options, given), None)

    def _fill(self, func_path: str, args: Optional[Sequence[Any]], kwargs: Optional[Dict[str, Any]],
              options: TaskOptions, data: Optional[bytes]) -> None:
        """Set the fields, once __init__ or decode_task has checked them."""
        self.func_path = func_path
        self.args = () if args is None else args
        self.kwargs = {} if kwargs is None else kwargs
        self.options = options
        self._data: Optional[bytes] = data

    @classmethod
    def _decoded(cls, func_path: str, args: Optional[Sequence[Any]], kwargs: Optional[Dict[str, Any]],
                 options: TaskOptions, data: bytes) -> "PyTask":
        """A PyTask from fields decode_task has checked: the worker's hot path checks them once, not twice."""
        task = cls.__new__(cls)
        task._fill(func_path, args, kwargs, options, data)
        return task

    @property
    def retry(self) -> int:
        """The retries left (the `retry` option)."""
        return self.options.retry

    @property
    def time_limit(self) -> Optional[float]:
        """The task's own time limit in seconds (its `time_limit` option), or None."""
        return self.options.time_limit

    def serialize(self) -> bytes:
        """The task's blob, made once and cached.

        A task without options in its blob is byte-identical to keakon/delayed 1.x's blob.

        Returns:
            The msgpack bytes a queue stores.

        Raises:
            TaskArgumentError: An argument msgpack cannot write; it names the argument and its type.
        """
        if self._data is None:
            retry = self.options.retry
            fields: tuple = (self.func_path, self.args, self.kwargs, retry)
            carried = self.options.wire_map() if self.options is not NO_OPTIONS else None
            if carried:
                fields += (carried,)
            elif retry == 0:
                fields = fields[:3]
                if not self.kwargs:
                    fields = fields[:2]
                    if not self.args:
                        fields = fields[:1]
            try:
                self._data = msgpack.packb(fields)
            except _UNPACKABLE as exc:
                raise _argument_error(self.func_path, (("args", self.args), ("kwargs", self.kwargs)), False,
                                      exc) from None
        return self._data

    @classmethod
    def deserialize(cls, data: bytes) -> "PyTask":
        """Decode a PyTask from its blob (what a worker does with what it claims).

        Args:
            data: The blob.

        Returns:
            The task, holding `data` as its blob.

        Raises:
            MalformedTaskError: Not a PyTask: not msgpack, the wrong shape (reason `"malformed"`), or a
                GoTask (reason `"go_task"`).
        """
        task = decode_task(data)
        if not isinstance(task, cls):
            raise MalformedTaskError(
                f"a GoTask for {task.func_path!r}: only a Go worker can run it",
                reason="go_task", func_path=task.func_path,
            )
        return task

    def with_retry(self, retry: int) -> "PyTask":
        """The same call with another retry count: what a retry enqueues.

        Args:
            retry: The new retry count.

        Returns:
            A new task; this one is unchanged.
        """
        return self.with_options(retry=retry)

    def with_options(self, **changes: Any) -> "PyTask":
        """The same call with some options changed (any `TaskOptions` field, state ones included): what
        a retry with backoff schedules, what a producer tracks.

        Args:
            **changes: The options to set.

        Returns:
            A new task; this one is unchanged.
        """
        return PyTask(self.func_path, self.args, self.kwargs, options=self.options.replace(**changes))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PyTask) and self.serialize() == other.serialize()

    def __repr__(self) -> str:  # bounded: a task's arguments may be as deep or as large as msgpack allows
        given = self.options.given()
        given.pop("retry", None)
        options = f", options={brief(given)}" if given else ""
        return (f"PyTask({brief(self.func_path)}, args={brief(self.args)}, kwargs={brief(self.kwargs)}, "
                f"retry={self.retry}{options})")


class GoTask:
    """A call of a Go handler, e.g. `GoTask("main.Add", [1, 2])`: its name, its argument and its options.

    Its blob is what go-delayed's `NewGoTask(func_path, arg...)` writes: a msgpack array
    `[func_path, payload]`, the payload a bin holding the msgpack of the argument. Options a worker acts
    on (`max_retries`, `backoff`, `time_limit`, and those of unique and tracked tasks) ride in a third
    element, written only when set; go-delayed's workers skip it and run the task without them, our Go
    worker honours them (see the docs' "Options on GoTasks"). Our Python workers dead-letter a GoTask
    (reason `go_task`). A contract (`delayed.contract.Contract`) checks the arguments against the Go
    handler before you enqueue.

    Args:
        func_path: The handler's name as go-delayed knows it: `main.Add` in a command, else its
            import path (`example.com/svc/jobs.Resize`).
        args: go-delayed's `arg`: the value itself for a one-argument function, a list for several
            (a Go struct is a list of its fields, in order), None for none. Wrap a value for a Go
            `float32` in `Float32`.
        options: A `TaskOptions` (or a blob's options map): the task's options.
        **given: Options by name, as `TaskOptions` takes them (`max_retries=5`, `time_limit=30`,
            `delay=10`, `result_ttl=3600`, ...); they win over `options`.

    Raises:
        TypeError: `retry` (keakon's array element, which a GoTask has no room for: use
            `max_retries`), a `backoff` that is a Python function's path (a GoTask's is seconds), an
            option of the wrong type, or an unknown one.
        ValueError: An option's value it cannot take, naming the option.

    Attributes:
        func_path (str): The handler's name.
        args (Any): The argument, as given (or as decoded).
        options (TaskOptions): The task's options.
    """

    __slots__ = ("func_path", "args", "options", "_payload", "_data")

    def __init__(self, func_path: str, args: Any = None, *,
                 options: Union[None, TaskOptions, Mapping[str, Any]] = None, **given: Any) -> None:
        chosen = _options_of(options, given)
        _refuse_for_go(chosen, chosen.given())
        self._fill(func_path, args, chosen, None, None)

    def _fill(self, func_path: str, args: Any, options: TaskOptions, payload: Optional[bytes],
              data: Optional[bytes]) -> None:
        """Set the fields. payload: the msgpack of args as a blob holds it (a decoded task keeps its
        bytes, so a rewrite changes its options and nothing else: Go's float32 or its map order stay)."""
        self.func_path = func_path
        self.args = args
        self.options = options
        self._payload = payload
        self._data: Optional[bytes] = data

    @classmethod
    def _decoded(cls, func_path: str, args: Any, options: TaskOptions, payload: Optional[bytes],
                 data: Optional[bytes]) -> "GoTask":
        """A GoTask from fields decode_task (or with_options) has checked."""
        task = cls.__new__(cls)
        task._fill(func_path, args, options, payload, data)
        return task

    def serialize(self) -> bytes:
        """The task's blob, made once and cached.

        Without options in its blob it is byte-identical to go-delayed's; with them, a third element.

        Returns:
            The msgpack bytes a queue stores.

        Raises:
            TaskArgumentError: An argument msgpack cannot write; it names the argument and its type.
        """
        if self._data is None:
            carried = self.options.wire_map() if self.options is not NO_OPTIONS else None
            try:
                if self._payload is None:
                    self._payload = _GO_NO_ARGUMENT if self.args is None else _pack_go_value(self.args)
                fields: tuple = (self.func_path, self._payload)
                self._data = msgpack.packb(fields + (carried,) if carried else fields)
            except _UNPACKABLE as exc:
                raise _argument_error(self.func_path, (("args", self.args),), True, exc) from None
        return self._data

    @classmethod
    def deserialize(cls, data: bytes) -> "GoTask":
        """Decode a GoTask from its blob.

        Args:
            data: The blob.

        Returns:
            The task, holding `data` as its blob.

        Raises:
            MalformedTaskError: Not a GoTask: not msgpack, the wrong shape (reason `"malformed"`), or a
                PyTask (reason `"py_task"`).
        """
        task = decode_task(data)
        if not isinstance(task, cls):
            raise MalformedTaskError(
                f"a PyTask for {task.func_path!r}, not a GoTask", reason="py_task", func_path=task.func_path
            )
        return task

    def with_options(self, **changes: Any) -> "GoTask":
        """The same call with some options changed (any `TaskOptions` field, state ones included): what
        a producer tracks, what a sweeper counts a crash in. Its argument's bytes are kept as they are.

        Args:
            **changes: The options to set.

        Returns:
            A new task; this one is unchanged.

        Raises:
            TypeError: A change a GoTask cannot carry, as for the constructor.
        """
        options = self.options.replace(**changes)
        _refuse_for_go(options, changes)
        return GoTask._decoded(self.func_path, self.args, options, self._payload, None)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GoTask) and self.serialize() == other.serialize()

    def __repr__(self) -> str:
        given = self.options.given()
        options = f", options={brief(given)}" if given else ""
        return f"GoTask({brief(self.func_path)}, args={brief(self.args)}{options})"


def _refuse_for_go(options: TaskOptions, names: Iterable[str]) -> None:
    """TypeError for an option among names that a GoTask's blob cannot carry as options holds it."""
    names = set(names)
    if "retry" in names and options.retry:
        raise TypeError("a GoTask has no retry (keakon/delayed's array element, which its blob has no room for): "
                        "use max_retries")
    if "backoff" in names and isinstance(options.backoff, str):
        raise TypeError(f"a GoTask's backoff is seconds, not a Python function's path ({options.backoff!r}): "
                        "a Go worker cannot call it")


Task = Union[PyTask, GoTask]
"""A task of either language, as a producer writes and a worker decodes it."""


def decode_task(data: bytes) -> Task:
    """Decode either kind of blob, checking its shape; the blob is kept as the task's bytes.

    Once the func path has decoded, every error names it, so a dead letter says whose task it was.
    """
    fields = _unpack(data)
    if type(fields) is not list or not 1 <= len(fields) <= 5 or type(fields[0]) is not str:
        raise MalformedTaskError(f"not a task: expected [func_path, ...], got {brief(fields)}")
    func_path = fields[0]
    if (len(fields) == 2 and fields[1] is None) or (len(fields) in (2, 3) and type(fields[1]) is bytes):
        return _decode_go_task(func_path, fields, data)
    _, args, kwargs, retry, options = fields + [None, None, 0, None][len(fields) - 1 :]
    # msgpack decodes arrays to lists, maps to dicts, integers to int: exact type checks, the hot path
    if args is not None and type(args) is not list:
        problem = f"task args must be an array or nil, got {brief(args)}"
    elif type(kwargs) is list:
        problem = ("task kwargs is an array, not a map: go-delayed's NewPyTask writes a Go struct's "
                   "fields without their names; pass kwargs as a map[string]interface{}")
    elif kwargs is not None and not (type(kwargs) is dict and all(type(k) is str for k in kwargs)):
        problem = f"task kwargs must be a map with string keys or nil, got {brief(kwargs)}"
    elif type(retry) is not int:
        problem = f"task retry must be an integer, got {brief(retry)}"
    elif options is not None and not (type(options) is dict and all(type(k) is str for k in options)):
        problem = f"task options must be a map with string keys, got {brief(options)}"
    elif not options and retry == 0:  # most tasks
        return PyTask._decoded(func_path, args, kwargs, NO_OPTIONS, data)
    else:
        try:
            checked = TaskOptions.from_wire(options or {}, retry)
        except (TypeError, ValueError) as exc:
            problem = str(exc)
        else:
            return PyTask._decoded(func_path, args, kwargs, checked, data)
    raise MalformedTaskError(problem, func_path=func_path)


def _decode_go_task(func_path: str, fields: List[Any], data: bytes) -> GoTask:
    """A GoTask from its blob's fields: [func_path, payload (a bin, or nil)] or [func_path, payload, options]."""
    payload = fields[1]
    try:
        args = None if payload is None else _unpack(payload)
    except MalformedTaskError as exc:
        raise MalformedTaskError(f"GoTask payload: {exc}", func_path=func_path) from None
    options = NO_OPTIONS
    if len(fields) == 3:
        carried = fields[2]
        if not (type(carried) is dict and all(type(k) is str for k in carried)):
            raise MalformedTaskError(f"task options must be a map with string keys, got {brief(carried)}",
                                     func_path=func_path)
        try:
            options = TaskOptions.from_wire(carried) if carried else NO_OPTIONS
        except (TypeError, ValueError) as exc:
            raise MalformedTaskError(str(exc), func_path=func_path) from None
    return GoTask._decoded(func_path, args, options, payload, data)
