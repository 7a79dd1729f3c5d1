"""Read a Go package's handlers into a contract with the bundled Go program (goreader/), built and
run by the user's Go toolchain; and check a contract file against the Go code it came from."""
import contextlib
import difflib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Sequence, Union

GOREADER = Path(__file__).parent / "goreader"


class GoReaderError(Exception):
    """The Go package could not be read; status 2 when Go itself is missing, else 1."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def read_package(directory: str, funcs: Sequence[str] = ()) -> Dict[str, Any]:
    """The contract (version 1) of the Go package in directory: all its top-level functions, or
    those named in funcs (as `Add` or `main.Add`), read in that directory's own module settings."""
    go = shutil.which("go")
    if go is None:
        raise GoReaderError("go is not on the PATH: install Go to read a Go package", status=2)
    if not Path(directory).is_dir():
        raise GoReaderError(f"{directory} is not a directory")
    with _reader(go) as reader:
        output = _run([str(reader), os.path.abspath(directory), *funcs], directory, dict(os.environ))
    contract: Dict[str, Any] = json.loads(output)
    return contract


def cache_dir() -> Path:
    """Where built Go readers are kept: $XDG_CACHE_HOME/delayed, else ~/.cache/delayed."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "delayed"


@contextlib.contextmanager
def _reader(go: str) -> Iterator[Path]:
    """The Go reader's binary, built once per reader source and Go version and then kept in
    cache_dir() (a build takes seconds); built into a temporary directory if that is not writable."""
    env = {**os.environ, "GOFLAGS": "-mod=readonly", "GOWORK": "off"}  # ours, not the user's -mod=vendor or go.work
    key = hashlib.sha256(_run([go, "env", "GOVERSION", "GOOS", "GOARCH"], GOREADER, env).encode())
    for path in sorted(p for p in GOREADER.iterdir() if p.is_file()):
        key.update(b"\0" + path.name.encode() + b"\0" + path.read_bytes())
    cached = cache_dir() / f"goreader-{key.hexdigest()[:16]}"
    if cached.is_file():
        yield cached
        return
    with tempfile.TemporaryDirectory(prefix="delayed-goreader-") as temp:
        source, binary = Path(temp) / "goreader", Path(temp) / "goreader.bin"
        shutil.copytree(GOREADER, source)
        _run([go, "build", "-o", str(binary), "."], source, env, "building the Go reader: ")
        try:
            _install(binary, cached)
        except OSError:
            yield binary
            return
        yield cached


def _install(binary: Path, target: Path) -> None:
    """Copy binary to target, which is whole or absent however many commands build it at once."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, part = tempfile.mkstemp(dir=target.parent, prefix=".goreader-")
    try:
        with os.fdopen(fd, "wb") as out, binary.open("rb") as built:
            shutil.copyfileobj(built, out)
        os.chmod(part, 0o755)
        os.replace(part, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part)


def _run(command: Sequence[str], cwd: Union[str, Path], env: Dict[str, str], context: str = "") -> str:
    """command's stdout; if it fails, a GoReaderError of its stderr (what Go said), after context."""
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise GoReaderError(context + (done.stderr.strip() or f"{command[0]} exited with status {done.returncode}"))
    return done.stdout


def dumps(contract: Dict[str, Any]) -> str:
    """A contract as its file holds it: sorted keys, 2-space indent, a trailing newline, so diffs are stable."""
    return json.dumps(contract, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def drift(path: str, directory: str, funcs: Sequence[str] = ()) -> Optional[str]:
    """A unified diff from the contract file at path to the contract the Go code in directory has
    now (read with the same funcs the file was made with), or None if they agree."""
    old = Path(path).read_text()
    new = dumps(read_package(directory, funcs))
    if old == new:
        return None
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=path, tofile=f"{directory} (now)"))
