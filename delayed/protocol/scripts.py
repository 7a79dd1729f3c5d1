"""The Lua scripts in lua/, each a Script: its source, and the KEYS and ARGV its header declares.

A script's header states its arguments once, by name, in order:

    -- KEYS: name noti counts
    -- ARGV: blobs...

A name that is an attribute of QueueKeys (name, noti, processing, ...) is filled from the queue's
keys the script is bound to; every other name is a keyword of the call. A name ending in "..."
takes a sequence, spread in place (none, one or many values). The typed calls of the protocol
modules (producer, worker_ops, sweeper_ops, dead_letters, ...) bind the scripts they run, so a
misspelled script is an import-time error, and a misspelled argument fails at its first call.
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


class Script:
    """One Lua script of lua/, read at import, with the KEYS and ARGV names its header declares."""

    def __init__(self, name: str) -> None:
        self.name = name
        source = _read(name)
        declared: Dict[str, List[str]] = {"KEYS": [], "ARGV": [], "uses": []}
        for part, names in _DECLARATION.findall(source):
            declared[part] += names.split()
        self.keys, self.args = tuple(declared["KEYS"]), tuple(declared["ARGV"])
        self.source = "".join(_read(used) for used in declared["uses"]) + source
        self.named = [name.rstrip(".") for name in (*self.keys, *self.args)]

    def bind(self, conn: Any, keys: Optional[QueueKeys] = None) -> "BoundScript":
        """The script registered on conn (redis-py: EVALSHA, loading it on NOSCRIPT), its queue
        key names filled from keys."""
        return BoundScript(self, conn.register_script(self.source), keys)

    def __repr__(self) -> str:
        return f"Script({self.name!r}, KEYS: {' '.join(self.keys)}, ARGV: {' '.join(self.args)})"


class BoundScript:
    """A Script on one connection and queue: call it with its header's names as keywords."""

    def __init__(self, script: Script, registered: Any, keys: Optional[QueueKeys]) -> None:
        self.script = script
        self._registered = registered
        known = {} if keys is None else {name: getattr(keys, name) for name in script.named
                                         if isinstance(getattr(keys, name, None), str)}
        self._fixed = known
        self._keys = self._layout(script.keys)
        self._args = self._layout(script.args)
        self._wanted = {name for name in script.named if name not in known}

    def _layout(self, names: Sequence[str]) -> List[Tuple[str, bool]]:
        """(name, spread?) per declared name, in order."""
        return [(name.rstrip("."), name.endswith("...")) for name in names]

    def _values(self, layout: List[Tuple[str, bool]], given: Dict[str, Any]) -> List[Any]:
        values: List[Any] = []
        for name, spread in layout:
            value = self._fixed[name] if name in self._fixed else given[name]
            if spread:
                values.extend(value)
            else:
                values.append(value)
        return values

    def __call__(self, **given: Any) -> Any:
        """Run the script (a coroutine on an asyncio client) with the declared names as keywords."""
        if given.keys() != self._wanted:
            raise TypeError(f"{self.script!r} called with {sorted(given)}, not {sorted(self._wanted)}")
        return self._registered(keys=self._values(self._keys, given), args=self._values(self._args, given))
