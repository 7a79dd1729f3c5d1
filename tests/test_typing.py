"""The package type-checks: mypy, configured in setup.cfg, finds nothing in delayed/."""
import subprocess
import sys

from .conftest import ROOT


def test_mypy_is_clean():
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
