"""The committed go_fixtures/ are what interop/cmd/fixtures writes now.

tests/test_go_fixtures.py trusts the committed blobs; this regenerates them with the pinned
go-delayed and compares, so a changed case, a new case or a bumped go-delayed cannot be left
uncommitted. Needs Go (and the module cache or network for go-delayed); skipped without `go`.
"""
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "go_fixtures"


@pytest.mark.skipif(shutil.which("go") is None, reason="`go` is not on PATH: cannot regenerate go_fixtures/")
def test_committed_fixtures_are_what_the_generator_writes(tmp_path):
    run = subprocess.run(["go", "run", "./cmd/fixtures", "-out", str(tmp_path)],
                         cwd=ROOT / "interop", capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"go run ./cmd/fixtures failed:\n{run.stderr}"
    fresh = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    committed = {path.name: path.read_bytes() for path in COMMITTED.iterdir() if path.name != "README.md"}
    assert sorted(fresh) == sorted(committed), "cases added or removed: regenerate (see go_fixtures/README.md)"
    changed = sorted(name for name in fresh if fresh[name] != committed[name])
    assert not changed, f"regenerate go_fixtures/ (see its README.md): these differ: {changed}"
