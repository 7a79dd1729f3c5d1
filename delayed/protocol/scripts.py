"""The Lua scripts in lua/, each a Script: its source, and the KEYS and ARGV its header declares.

A script's header states its arguments once, by name, in order:

    -- KEYS: name noti counts
    -- ARGV: blobs...

A name that is an attribute of QueueKeys (name, noti, processing, ...) is filled from the queue's
keys the script is bound to; every other name is a keyword of the call. A name ending in "..."
takes a sequence, spread in place (none, one or many values). A misspelled script is an
import-time error (each is a module-level constant, SCRIPT = Script("name")), and a misspelled
argument fails at its first call, before anything is sent.

A script is bound one way: through the Scripts of the connection and queue it runs on,
`self._scripts[ENQUEUE](blobs=...)`, which binds it the first time it runs there and keeps it. A bind
costs a SHA1 of the source and the key layout, about 14 µs: a worker's per-task calls must not pay
it again, and an object must not pay it for the scripts it never runs (a Queue that only enqueues
runs none of its dead letters' six). One mechanism serves objects that live long (WorkerOps, the
producer's executors) and reads that get their connection and queue per call (inspect), on redis-py
and redis.asyncio clients alike. An object that serves many queues binds without keys and names
them per call (periodic.Ticks). tests/test_scripts.py finds a script bound any other way.
"""
import re
from importlib import resources
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..wire.keys import QueueKeys

TRACKING = "tracking"
"""lua/tracking.lua: the functions that write tracked tasks' records; goes before a script that
declares `-- uses: tracking`."""
_DECLARATION = re.compile(r"^-- (KEYS|ARGV|uses):(.*)$", re.MULTILINE)


def _read(name: str) -> str:
    return resources.files(__package__).joinpath("lua", name + ".lua").read_text("utf-8")


def _used(names: Sequence[str], order: List[str]) -> List[str]:
    """The files a script uses, each after those it uses itself (a used file's `-- uses:` line), once."""
    for name in names:
        if name not in order:
            _used([used for part, names in _DECLARATION.findall(_read(name)) if part == "uses"
                   for used in names.split()], order)
            order.append(name)
    return order


class Script:
    """One Lua script of lua/, read at import, with the KEYS and ARGV names its header declares."""

    def __init__(self, name: str) -> None:
        self.name = name
        source = _read(name)
        declared: Dict[str, List[str]] = {"KEYS": [], "ARGV": [], "uses": []}
        for part, names in _DECLARATION.findall(source):
            declared[part] += names.split()
        self.keys, self.args = tuple(declared["KEYS"]), tuple(declared["ARGV"])
        self.source = "".join(_read(used) for used in _used(declared["uses"], [])) + source
        self.named = [name.rstrip(".") for name in (*self.keys, *self.args)]

    def bind(self, conn: Any, keys: Optional[QueueKeys] = None) -> "BoundScript":
        """The script registered on conn (redis-py: EVALSHA, loading it on NOSCRIPT), its queue
        key names filled from keys."""
        return BoundScript(self, conn.register_script(self.source), keys)

    def __repr__(self) -> str:
        return f"Script({self.name!r}, KEYS: {' '.join(self.keys)}, ARGV: {' '.join(self.args)})"


class Scripts:
    """The scripts run on one connection (and queue: keys), each bound the first time it runs and kept."""

    def __init__(self, conn: Any, keys: Optional[QueueKeys] = None) -> None:
        self._conn, self._keys = conn, keys
        self._bound: Dict[Script, BoundScript] = {}

    def __getitem__(self, script: Script) -> "BoundScript":
        bound = self._bound.get(script)
        if bound is None:
            bound = self._bound[script] = script.bind(self._conn, self._keys)
        return bound


class BoundScript:
    """A Script on one connection and queue: call it with its header's names as keywords."""

    def __init__(self, script: Script, registered: Any, keys: Optional[QueueKeys]) -> None:
        self.script = script
        self._registered = registered
        fixed = {} if keys is None else {name: getattr(keys, name) for name in script.named
                                         if isinstance(getattr(keys, name, None), str)}
        self._wanted = sorted(name for name in script.named if name not in fixed)
        self._keys = _Layout(script.keys, fixed)
        self._args = _Layout(script.args, fixed)

    def __call__(self, **given: Any) -> Any:
        """Run the script (a coroutine on an asyncio client) with the declared names as keywords."""
        if len(given) != len(self._wanted):
            raise self._misnamed(given)
        try:
            return self._registered(keys=self._keys.values(given), args=self._args.values(given))
        except KeyError:
            raise self._misnamed(given) from None

    def _misnamed(self, given: Dict[str, Any]) -> TypeError:
        return TypeError(f"{self.script!r} called with {sorted(given)}, not {self._wanted}")


class _Layout:
    """Where a script's KEYS (or ARGV) come from, in order: the queue's keys first known (fixed), then
    per declared name whether it is given, and whether it is spread."""

    def __init__(self, names: Sequence[str], fixed: Dict[str, str]) -> None:
        entries = [(name.rstrip("."), name.endswith("...")) for name in names]
        lead = 0
        while lead < len(entries) and entries[lead][0] in fixed:
            lead += 1
        self._lead = [fixed[name] for name, _ in entries[:lead]]
        self._rest: List[Tuple[str, bool, Optional[str]]] = [(name, spread, fixed.get(name))
                                                              for name, spread in entries[lead:]]

    def values(self, given: Dict[str, Any]) -> List[Any]:
        """The values in order (KeyError for a name neither fixed nor given)."""
        values = list(self._lead)
        for name, spread, fixed in self._rest:
            value = given[name] if fixed is None else fixed
            if spread:
                values.extend(value)
            else:
                values.append(value)
        return values
