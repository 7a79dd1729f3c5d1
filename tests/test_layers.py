"""The layering: the duties (worker, sweeper, scheduler, ...) never import their command lines
(imports go down only: command lines sit on top); `python -m delayed.worker` and friends, and the
console scripts, still start them."""
import ast
import importlib.metadata
import subprocess
import sys

import pytest

from .conftest import ROOT

PACKAGE = ROOT / "delayed"
FACES = {"cli.py", "__main__.py"}  # command lines: they may import anything below them


def _imported(path):
    """The absolute names of the delayed modules a file imports (relative imports resolved)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    package = parts[:-1]  # the package a relative import starts from (a package's own, for __init__.py)
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def test_no_duty_imports_the_command_line():
    importers = sorted(str(path.relative_to(ROOT)) for path in PACKAGE.rglob("*.py")
                       if path.name not in FACES and "delayed.cli" in _imported(path))
    assert importers == []


def test_importing_the_duties_leaves_the_command_line_unimported():
    code = ("import sys, delayed, delayed.worker, delayed.sweeper, delayed.scheduler, delayed.supervisor; "
            "from delayed.worker import Worker; from delayed.sweeper import Sweeper; "
            "from delayed.scheduler import Periodic, Scheduler; print('delayed.cli' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stdout + done.stderr


@pytest.mark.parametrize("duty", ["worker", "sweeper", "scheduler"])
def test_python_m_starts_each_duty_s_command_line(duty):
    done = subprocess.run([sys.executable, "-m", f"delayed.{duty}", "--help"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m delayed.{duty}")


def test_the_console_scripts_resolve():
    scripts = {entry.name: entry for entry in importlib.metadata.entry_points(group="console_scripts")
               if entry.name.startswith("delayed-")}
    assert sorted(scripts) == ["delayed-scheduler", "delayed-sweeper", "delayed-worker"]
    assert all(callable(entry.load()) for entry in scripts.values())
