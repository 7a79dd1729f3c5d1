"""`delayed contract go` and `delayed contract check`, run as processes with the real Go toolchain on
tests/contract/goapp (a handler for every kind of parameter, and some go-delayed cannot call)."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from .conftest import ROOT

GOAPP = ROOT / "tests" / "contract" / "goapp"
EXPECTED = ROOT / "tests" / "contract" / "goapp.contract.json"
needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="go is not on the PATH")


def delayed(*args: str, env: Optional[dict] = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "delayed", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@needs_go
def test_goapp_s_contract_is_the_checked_in_one(tmp_path):
    out = tmp_path / "contract.json"
    done = delayed("contract", "go", str(GOAPP), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text() == EXPECTED.read_text()


@needs_go
def test_func_picks_handlers_by_short_or_full_name():
    done = delayed("contract", "go", str(GOAPP), "--func", "Ints", "--func", "main.Watch")
    assert done.returncode == 0, done.stderr
    contract = json.loads(done.stdout)
    assert list(contract["handlers"]) == ["main.Ints"]
    assert contract["refused"] == {"main.Watch": "takes a chan int (parameter c), which go-delayed cannot decode"}


@needs_go
def test_an_unknown_func_is_one_line_and_status_1():
    done = delayed("contract", "go", str(GOAPP), "--func", "Ints", "--func", "Nope")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "delayed contract: no top-level function Nope in example.com/goapp\n"


def test_without_go_on_the_path_it_says_so_and_exits_2():
    done = delayed("contract", "go", str(GOAPP), env={"PATH": ""})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "delayed contract: go is not on the PATH: install Go to read a Go package\n"


@needs_go
def test_check_passes_while_the_go_code_is_unchanged():
    done = delayed("contract", "check", str(EXPECTED), str(GOAPP))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@needs_go
def test_check_shows_a_diff_and_exits_1_once_a_parameter_is_added(tmp_path):
    app = tmp_path / "goapp"
    shutil.copytree(GOAPP, app)
    handlers = app / "handlers.go"
    handlers.write_text(handlers.read_text().replace("func Pointer(p *int)", "func Pointer(p *int, q string)"))
    done = delayed("contract", "check", str(EXPECTED), str(app))
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith(f"--- {EXPECTED}\n+++ {app} (now)\n")
    added = [line for line in done.stdout.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert '+      "signature": "func Pointer(p *int, q string)",' in added
    assert '+          "name": "q",' in added


@needs_go
def test_a_package_s_handlers_are_keyed_as_the_go_runtime_names_them(tmp_path):
    """go-delayed names a handler runtime.FuncForPC(...).Name(): main.Add in a command, else the
    import path, with the dots of its last element escaped."""
    (tmp_path / "go.mod").write_text("module example.com/svc\n\ngo 1.21\n")
    (tmp_path / "jobs.v2").mkdir()
    (tmp_path / "jobs.v2" / "jobs.go").write_text("package jobs\n\nfunc Resize(w int) {}\n")
    (tmp_path / "main.go").write_text(
        'package main\n\nimport (\n\t"fmt"\n\t"reflect"\n\t"runtime"\n\n\tjobs "example.com/svc/jobs.v2"\n)\n\n'
        "func Add(a int) {}\n\nfunc main() {\n\tfor _, f := range []any{Add, jobs.Resize} {\n"
        "\t\tfmt.Println(runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name())\n\t}\n}\n")
    names = subprocess.run(["go", "run", "."], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert names.returncode == 0, names.stderr
    keys = []
    for directory in (tmp_path, tmp_path / "jobs.v2"):
        done = delayed("contract", "go", str(directory))
        assert done.returncode == 0, done.stderr
        keys += list(json.loads(done.stdout)["handlers"])
    assert names.stdout.split() == keys == ["main.Add", "example.com/svc/jobs%2ev2.Resize"]


def cache_env(cache: Path, path: str) -> dict:
    """The environment for a contract command whose reader cache is cache (and whose PATH is path):
    Go keeps its own build cache where it was, though XDG_CACHE_HOME moves."""
    gocache = subprocess.run(["go", "env", "GOCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    return {**os.environ, "XDG_CACHE_HOME": str(cache), "GOCACHE": gocache, "PATH": path}


@needs_go
def test_the_go_reader_is_built_once_and_then_taken_from_the_cache(tmp_path):
    done = delayed("contract", "go", str(GOAPP), env=cache_env(tmp_path / "cache", os.environ["PATH"]))
    assert done.returncode == 0, done.stderr
    [reader] = (tmp_path / "cache" / "delayed").iterdir()
    assert reader.name.startswith("goreader-") and os.access(reader, os.X_OK)
    # a go that cannot build: the next command still reads the package, with the cached reader
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "go"
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = build ] && {{ echo "no build here" >&2; exit 1; }}\n'
                       f'exec {shutil.which("go")} "$@"\n')
    wrapper.chmod(0o755)
    done = delayed("contract", "check", str(EXPECTED), str(GOAPP),
                   env=cache_env(tmp_path / "cache", f"{tmp_path / 'bin'}:{os.environ['PATH']}"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert list((tmp_path / "cache" / "delayed").iterdir()) == [reader]


@needs_go
def test_an_unwritable_cache_still_reads_the_package(tmp_path):
    (tmp_path / "cache").write_text("a file where the cache directory would be")
    done = delayed("contract", "check", str(EXPECTED), str(GOAPP),
                   env=cache_env(tmp_path / "cache", os.environ["PATH"]))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
