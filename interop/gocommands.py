"""go-delayed's own worker, producer and sweeper (the commands in interop/cmd/) for Python callers.

The benchmark, the chaos runs and the demo run these beside ours. Each first calls `build()`:
it builds the commands into interop/bin/ with `go build` (a no-op when they are current) and,
where Go or go-delayed's module is not available, returns the reason in one line instead of
raising, so the caller can say so and go on without them.

Import it with the repository root on sys.path: `from interop import gocommands`.
"""
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import IO, List, Optional
from urllib.parse import urlsplit

INTEROP = Path(__file__).resolve().parent
BIN = INTEROP / "bin"
COMMANDS = ("goworker", "goproducer", "gosweeper")
MODULE = "github.com/yizhisec/go-delayed"


def build(timeout: float = 300) -> Optional[str]:
    """Build the commands into interop/bin/; None when they are ready, else why they are not."""
    go = shutil.which("go")
    if go is None:
        return "Go is not installed (no `go` on the PATH)"
    argv = [go, "build", "-o", str(BIN) + "/", *(f"./cmd/{name}" for name in COMMANDS)]
    try:
        done = subprocess.run(argv, cwd=INTEROP, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"`go build` in interop/ took over {timeout:.0f} s (fetching {MODULE}?)"
    if done.returncode:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1].strip()
        what = f"{MODULE} does not resolve" if MODULE in done.stderr else "`go build` in interop/ failed"
        return f"{what}: {last}"
    return None


def path(name: str) -> str:
    """The built command `name` (one of COMMANDS)."""
    return str(BIN / name)


def redis_address(url: str) -> str:
    """The commands' `-redis host:port` for a redis:// URL (they speak to database 0 only)."""
    parts = urlsplit(url)
    if parts.scheme != "redis" or parts.path not in ("", "/", "/0") or parts.password:
        raise ValueError(f"the Go commands need redis://host:port/0 without a password, not {url}")
    return f"{parts.hostname or 'localhost'}:{parts.port or 6379}"


def worker_argv(url: str, queue: str, *flags: str) -> List[str]:
    """argv of one go-delayed worker on `queue`; it stops gracefully only on SIGHUP.

    Mind `-keep-alive-timeout`: most values break go-delayed's SETEX (interop/README.md)."""
    return [path("goworker"), "-redis", redis_address(url), "-queue", queue, *flags]


def producer_argv(url: str, queue: str, *flags: str) -> List[str]:
    """argv of go-delayed's producer enqueuing into `queue` (see interop/README.md for flags)."""
    return [path("goproducer"), "-redis", redis_address(url), "-queue", queue, *flags]


def sweeper_argv(url: str, queues: List[str], *flags: str) -> List[str]:
    """argv of go-delayed's sweeper over `queues`; it handles no signal, so stop it with SIGKILL."""
    return [path("gosweeper"), "-redis", redis_address(url), "-queues", ",".join(queues), *flags]


def online_id(stdout: IO[str]) -> str:
    """Read a goworker's stdout up to its online line; the worker id it printed."""
    for line in stdout:
        event = json.loads(line)
        if event.get("event") == "online":
            return event["id"]
    raise RuntimeError("goworker exited before going online")


def version() -> str:
    """go-delayed's version as built into goworker (its pseudo-version's commit), and Go's."""
    go = shutil.which("go")
    out = subprocess.run([go, "version", "-m", path("goworker")], capture_output=True, text=True).stdout if go else ""
    toolchain = re.search(r":\s*(go[\d.]+)", out)
    dep = re.search(re.escape(MODULE) + r"\s+(\S+)", out)
    commit = dep.group(1).rsplit("-", 1)[-1][:7] if dep else "?"
    return f"{commit} ({toolchain.group(1) if toolchain else 'go ?'})"
