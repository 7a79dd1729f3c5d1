"""The layering of delayed/, and the rule it follows:

    foundation (errors, logger, testing)
      < wire       bytes and names only: task blobs, keys, the dead-letter and tracking records
      < integrations  middleware for tracing and error tools (OpenTelemetry, Sentry): the public hooks only
      < contract   go-delayed handlers' parameter types, read from Go code (never Redis)
      < protocol   the only package that talks to Redis: connection, Lua scripts, Queue and the
                   operations of workers, sweepers, the scheduler and operators
      < runtime    what every long-running role shares: lifecycle, role loop, backoff, command lines
      < delay      the producer's decorator
      < roles      worker, sweeper, scheduler: side by side, none imports another
      < ops        for people: the `delayed` command, admin, metrics, dashboard
      < faces      delayed/__init__.py, __main__.py and the keakon-era and documented paths
                   (delayed.queue, delayed.task, delayed.metrics, delayed.dashboard)

A module imports only from its own layer or those below it; no modules, and no folders, import
each other in a circle; only a command line (a cli.py or __main__.py) imports a command line; and
outside delayed.protocol (and delayed.testing, which starts servers for tests) no code sends a
Redis command. `python -m delayed.worker` and friends, and the console scripts, still start them.
"""
import ast
import importlib.metadata
import subprocess
import sys
from pathlib import Path
from typing import Dict, Set

import pytest
import redis

from .conftest import ROOT

PACKAGE = ROOT / "delayed"
LAYERS = (
    ("foundation", ("delayed.errors", "delayed.logger", "delayed.testing")),
    ("wire", ("delayed.wire",)),
    ("integrations", ("delayed.integrations",)),
    ("contract", ("delayed.contract",)),
    ("protocol", ("delayed.protocol",)),
    ("runtime", ("delayed.runtime",)),
    ("delay", ("delayed.delay",)),
    ("roles", ("delayed.worker", "delayed.sweeper", "delayed.scheduler")),
    ("ops", ("delayed.ops",)),
    ("faces", ("delayed", "delayed.__main__", "delayed.queue", "delayed.task", "delayed.metrics",
               "delayed.dashboard")),
)
ROLES = dict(LAYERS)["roles"]
COMMAND_LINES = {"cli", "__main__"}
# redis-py's command methods (those of a client and of a pipeline), as called on a client outside protocol/
REDIS_COMMANDS = ({name for name in dir(redis.Redis) if not name.startswith("_")} - {"close", "from_url"}) | {
    "execute", "register_script"}
CLIENT_NAMES = {"conn", "_conn", "client", "_client", "pipe", "pipeline", "redis", "sentinel"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imported(name: str) -> Set[str]:
    """The delayed modules a module imports, anywhere in it (relative imports resolved, each name
    taken as a module where it is one, else as its module's)."""
    path = MODULES[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            bases = [alias.name for alias in node.names]
            names = bases
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        found.update(module for module in names if module in MODULES and module != name)
    return found


IMPORTS: Dict[str, Set[str]] = {name: _imported(name) for name in MODULES}


def _layer(module: str) -> int:
    """The index in LAYERS of the layer a module belongs to (the longest prefix that names it)."""
    best = max(((len(prefix), index) for index, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes
                if module == prefix or module.startswith(prefix + ".")), default=None)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[1]


def _cycle(graph: Dict[str, Set[str]]) -> list:
    """A cycle in graph (a list of its nodes), or []."""
    state: Dict[str, int] = {}
    stack: list = []

    def visit(node: str) -> list:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def test_every_module_imports_only_its_own_layer_or_below():
    upward = sorted(f"{module} ({LAYERS[_layer(module)][0]}) imports {target} ({LAYERS[_layer(target)][0]})"
                    for module, targets in IMPORTS.items() for target in targets
                    if _layer(target) > _layer(module) and not target.startswith(module + "."))
    assert upward == []


def test_no_role_imports_another():
    def role(module: str) -> str:
        return next((prefix for prefix in ROLES if module == prefix or module.startswith(prefix + ".")), "")

    crossing = sorted(f"{module} imports {target}" for module, targets in IMPORTS.items() for target in targets
                      if role(module) and role(target) and role(module) != role(target))
    assert crossing == []


def test_no_modules_import_each_other_in_a_circle():
    assert _cycle(IMPORTS) == []


def test_no_folders_import_each_other_in_a_circle():
    def folder(module: str) -> str:
        return str(MODULES[module].parent.relative_to(ROOT))

    graph: Dict[str, Set[str]] = {}
    for module, targets in IMPORTS.items():
        graph.setdefault(folder(module), set()).update(folder(target) for target in targets
                                                       if folder(target) != folder(module))
    # a package's __init__ may name what its own folder holds; that is no circle of folders
    graph = {node: {t for t in targets if not t.startswith(node + "/")} for node, targets in graph.items()}
    assert _cycle(graph) == []


def test_only_a_command_line_imports_a_command_line():
    def command_line(module: str) -> bool:
        return module.rsplit(".", 1)[-1] in COMMAND_LINES or _layer(module) == len(LAYERS) - 1

    importers = sorted(f"{module} imports {target}" for module, targets in IMPORTS.items() for target in targets
                       if target.rsplit(".", 1)[-1] in COMMAND_LINES and not command_line(module))
    assert importers == []


def _redis_calls(path: Path) -> Set[str]:
    """Where a file calls a redis-py command on something named like a client (conn, pipe, ...)."""
    calls = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in REDIS_COMMANDS:
            receiver = node.func.value
            name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
            if name in CLIENT_NAMES:
                calls.add(f"{path.relative_to(ROOT)}:{node.lineno} {name}.{node.func.attr}()")
    return calls


def test_only_the_protocol_sends_redis_commands():
    outside = sorted(call for module, path in MODULES.items() if not module.startswith(("delayed.protocol",
                                                                                          "delayed.testing"))
                     for call in _redis_calls(path))
    assert outside == []


def test_the_redis_command_check_finds_a_command():
    assert _redis_calls(PACKAGE / "protocol" / "worker_ops.py")  # the check above can fail


def test_importing_the_roles_leaves_the_command_lines_unimported():
    code = ("import sys, delayed, delayed.worker, delayed.sweeper, delayed.scheduler, delayed.worker.supervisor; "
            "from delayed.worker import Worker; from delayed.sweeper import Sweeper; "
            "from delayed.scheduler import Periodic, Scheduler; "
            "print(sorted(m for m in sys.modules if m.endswith(('.cli', '__main__')) and m.startswith('delayed')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


@pytest.mark.parametrize("duty", ["worker", "sweeper", "scheduler"])
def test_python_m_starts_each_role_s_command_line(duty):
    done = subprocess.run([sys.executable, "-m", f"delayed.{duty}", "--help"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m delayed.{duty}")


@pytest.mark.parametrize("documented", ["metrics", "dashboard"])
def test_python_m_starts_the_documented_ops_command_lines(documented):
    done = subprocess.run([sys.executable, "-m", f"delayed.{documented}", "--help"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


def test_the_console_scripts_resolve():
    scripts = {entry.name: entry for entry in importlib.metadata.entry_points(group="console_scripts")
               if entry.name.startswith("delayed")}
    assert sorted(scripts) == ["delayed", "delayed-scheduler", "delayed-sweeper", "delayed-worker"]
    assert all(callable(entry.load()) for entry in scripts.values())


def test_the_keakon_era_and_documented_import_paths_work():
    import delayed as package
    from delayed.delay import delayed
    from delayed.logger import setup_logger
    from delayed.queue import AsyncQueue, Queue
    from delayed.sweeper import Sweeper
    from delayed.task import GoTask, PyTask
    from delayed.worker import Worker
    assert (AsyncQueue, PyTask, GoTask, Worker, Sweeper, delayed, setup_logger) == (
        package.AsyncQueue, package.PyTask, package.GoTask, package.Worker, package.Sweeper,
        package.delayed, package.setup_logger)
    assert issubclass(Queue, package.Queue)  # keakon's Queue: the producer's, with keakon's worker calls
