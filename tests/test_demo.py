"""`make demo` (examples/demo.py) runs to "demo: OK": its Python part, go-delayed's worker and producer,
and our Go worker handing a tracked GoTask's result to Python; without Go, its Go parts each say in
one line that they did not run, and it still passes."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="go is not on the PATH")


def demo(env: dict) -> list:
    """Run `make demo`'s script; the lines it printed, after checking that it passed."""
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "demo: OK" in lines
    return lines


@needs_go
def test_python_reads_what_our_go_workers_handler_returned():
    lines = demo(dict(os.environ))
    assert "demo: our producer enqueued a tracked GoTask for our Go worker: main.Add(40, 2)" in lines
    assert "demo: TaskHandle.result() read what the Go handler returned: 42" in lines
    assert "demo: our Go worker exited with 0" in lines


def test_without_go_the_go_parts_say_they_did_not_run_and_the_demo_passes():
    path = [entry for entry in os.environ["PATH"].split(os.pathsep)
            if entry and not (Path(entry) / "go").exists()]
    lines = demo(dict(os.environ, PATH=os.pathsep.join(path)))
    assert "demo: the Go part with our Go worker did not run: Go is not installed (no `go` on the PATH)" in lines
    assert not any(line.startswith("demo: TaskHandle.result()") for line in lines)
