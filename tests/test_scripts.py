"""The Lua scripts' typed calls: each script's header declares its KEYS and ARGV once, by name,
and a call that names them wrong fails before anything reaches Redis."""
import ast
from importlib import resources

import pytest

from delayed.protocol.producer import ENQUEUE
from delayed.protocol.scripts import Script, Scripts
from delayed.wire.keys import QueueKeys

from .conftest import ROOT

LUA = ROOT / "delayed" / "protocol" / "lua"
LIBRARIES = {"tracking", "flow", "dead_filter", "limits"}  # functions other scripts include (`-- uses: NAME`), never run alone


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


def _bound_another_way():
    """Where delayed/ binds a script other than as scripts.py says, through a Scripts: a Script.bind of
    its own, or a script registered on a connection or bound without Script.bind. As "path:line: code"."""
    found = []
    for path in sorted((ROOT / "delayed").rglob("*.py")):
        where = str(path.relative_to(ROOT))
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Call) or where == "delayed/protocol/scripts.py":
                continue
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            binds = name == "bind" and getattr(node.func.value, "id", "") != "sock"  # a socket's bind is no script's
            if binds or name in ("register_script", "BoundScript"):
                found.append(f"{where}:{node.lineno}: {ast.get_source_segment(source, node)}")
    return found


def test_every_script_is_bound_through_the_scripts_of_its_connection():
    assert _bound_another_way() == []


def test_a_script_is_bound_once_per_connection_and_queue_and_only_once_it_runs(conn):
    scripts = Scripts(conn, QueueKeys.of("q"))
    assert scripts[ENQUEUE] is scripts[ENQUEUE] and scripts._bound.keys() == {ENQUEUE}
    scripts[ENQUEUE](blobs=[b"a"])
    assert conn.lrange("q", 0, -1) == [b"a"]


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
