"""The tree is ruff-clean, beside mypy (test_typing): pyflakes, pycodestyle's errors and sorted imports,
as pyproject.toml's [tool.ruff] selects them, over every Python file of the repository."""
import subprocess
import sys

from .conftest import ROOT


def test_ruff_is_clean():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr
