"""The Lua scripts' typed calls: each script's header declares its KEYS and ARGV once, by name,
and a call that names them wrong fails before anything reaches Redis."""
import ast
from importlib import resources

import pytest

from delayed.protocol.scripts import Script
from delayed.wire.keys import QueueKeys

from .conftest import ROOT

LUA = ROOT / "delayed" / "protocol" / "lua"
LIBRARIES = {"tracking", "dead_filter"}  # functions other scripts include (`-- uses: NAME`), never run alone


def _scripts_made_in_the_protocol():
    """The names given to Script(...) at module level in delayed/protocol/."""
    names = set()
    for path in (ROOT / "delayed" / "protocol").glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                    and getattr(node.value.func, "id", "") == "Script":
                names.add(node.value.args[0].value)
    return names


def test_every_script_has_one_typed_call_and_every_call_a_script():
    assert _scripts_made_in_the_protocol() == {path.stem for path in LUA.glob("*.lua")} - LIBRARIES


LAZY_PRODUCER = "delayed/protocol/queue.py"
"""Queue still binds its producer scripts on first use (cached_property), until its producer core binds them
in its constructor as the rest of the tree does."""


def _bound_another_way():
    """Where delayed/ binds a script other than as scripts.py says, in the constructor of the object that runs
    it (`self._NAME = SCRIPT.bind(...)` in an __init__): a bind anywhere else (per call, on first use), or a
    script registered on a connection or bound without Script.bind. As "path:line: code"."""
    found = []
    for path in sorted((ROOT / "delayed").rglob("*.py")):
        where = str(path.relative_to(ROOT))
        source = path.read_text()
        tree = ast.parse(source)
        in_constructors = {id(node.value) for function in ast.walk(tree)
                           if isinstance(function, ast.FunctionDef) and function.name == "__init__"
                           for node in ast.walk(function)
                           if isinstance(node, ast.Assign) and len(node.targets) == 1
                           and isinstance(node.targets[0], ast.Attribute)
                           and getattr(node.targets[0].value, "id", "") == "self"}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or where == "delayed/protocol/scripts.py":
                continue
            called = node.func
            name = getattr(called, "attr", getattr(called, "id", ""))
            binds = name == "bind" and (getattr(called.value, "id", "").isupper()  # SCRIPT.bind(...)
                                        or getattr(getattr(called.value, "func", None), "id", "") == "Script")
            if binds and id(node) not in in_constructors and where != LAZY_PRODUCER \
                    or name in ("register_script", "BoundScript"):
                found.append(f"{where}:{node.lineno}: {ast.get_source_segment(source, node)}")
    return found


def test_every_script_is_bound_in_the_constructor_of_the_object_that_runs_it():
    assert _bound_another_way() == []


@pytest.mark.parametrize("name", sorted({path.stem for path in LUA.glob("*.lua")} - LIBRARIES))
def test_every_script_declares_its_keys_and_argv(name):
    script = Script(name)
    assert script.keys, f"{name}.lua declares no KEYS"
    assert len(set(script.named)) == len(script.named), f"{name}.lua names an argument twice"
    source = resources.files("delayed.protocol").joinpath("lua", name + ".lua").read_text()
    assert "KEYS[" not in "\n".join(line for line in source.splitlines() if line.startswith("--")), \
        f"{name}.lua's comments still number its KEYS: name them as its header does"


def test_a_misspelled_script_fails_when_its_module_is_imported():
    with pytest.raises(FileNotFoundError):
        Script("enqeue")


def test_a_call_with_a_misspelled_or_missing_argument_fails_before_redis_is_reached(conn):
    conn.zadd("q_scheduled", {b"12345678task": 1})
    bound = Script("move_due").bind(conn, QueueKeys.of("q"))
    with pytest.raises(TypeError, match="move_due"):
        bound(now=2.0, limt=10)
    with pytest.raises(TypeError, match="move_due"):
        bound(now=2.0)
    assert conn.zcard("q_scheduled") == 1
    assert bound(now=2.0, limit=10) == 1 and conn.lrange("q", 0, -1) == [b"task"]


def test_names_that_are_queue_keys_are_filled_from_the_queue_and_spread_names_are_spread(conn):
    Script("enqueue").bind(conn, QueueKeys.of("q"))(blobs=[b"a", b"b"])
    assert conn.lrange("q", 0, -1) == [b"a", b"b"] and conn.llen("q_noti") == 2
    assert conn.hget("q_counts", "enqueued") == b"2"
