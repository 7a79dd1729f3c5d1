"""go-delayed's own worker, producer and sweeper, our Go worker and client, and Asynq's (the
commands in interop/cmd/) for Python callers.

The live tests, the benchmark, the chaos runs and the demo run these beside ours. Each first
calls `build()`: it builds the commands into interop/bin/ with `go build` (a no-op when they are
current) and, where Go or go-delayed's module is not available, returns the reason in one line
instead of raising, so the caller can say so and go on without them.
`python -m interop.gocommands` does the same for interop/run: exit status 3 and the reason on
stdout when Go or go-delayed is missing.

Import it with the repository root on sys.path: `from interop import gocommands`.
"""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import IO, Dict, List, Optional
from urllib.parse import urlsplit

INTEROP = Path(__file__).resolve().parent
BIN = INTEROP / "bin"
COMMANDS = ("goworker", "goproducer", "gosweeper", "clusterproducer", "contractworker", "ourgoworker",
            "ourgoclient", "tracedgoworker", "asynqworker", "asynqproducer")
MODULE = "github.com/yizhisec/go-delayed"
# commands that need a module beside go-delayed: where it does not resolve, they alone are not built
# (unavailable says why) and the rest still are
ASYNQ = "github.com/hibiken/asynq"
NEEDS = {"clusterproducer": "github.com/redis/go-redis/v9", "asynqworker": ASYNQ, "asynqproducer": ASYNQ,
         "tracedgoworker": "go.opentelemetry.io/otel/sdk/trace"}
unavailable: Dict[str, str] = {}


def build(timeout: float = 300) -> Optional[str]:
    """Build the commands into interop/bin/ (a no-op when they are current).

    None when they are ready; the reason, in one line, when Go is missing or go-delayed's module
    does not resolve on this machine. A command whose other module (NEEDS) does not resolve is
    left out, the reason in `unavailable[name]`. Raises RuntimeError when our own commands do not compile:
    that is a bug to fix, not a tool to do without.
    """
    go = shutil.which("go")
    if go is None:
        return "Go is not installed (no `go` on the PATH)"
    try:
        resolved = _go(go, ["build", MODULE + "/delayed"], timeout)
        if resolved.returncode:
            return f"{MODULE} does not resolve on this machine: {_first_error(resolved.stderr)}"
        unavailable.clear()
        for name, module in NEEDS.items():
            resolved = _go(go, ["build", module], timeout)
            if resolved.returncode:
                unavailable[name] = f"{module} does not resolve on this machine: {_first_error(resolved.stderr)}"
        names = [name for name in COMMANDS if name not in unavailable]
        built = _go(go, ["build", "-o", str(BIN) + "/", *(f"./cmd/{name}" for name in names)], timeout)
    except subprocess.TimeoutExpired:
        return f"`go build` in interop/ took over {timeout:.0f} s (fetching {MODULE}?)"
    if built.returncode:
        raise RuntimeError(f"interop/cmd does not build:\n{built.stderr}")
    return None


def _go(go: str, args: List[str], timeout: float) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([go, *args], cwd=INTEROP, capture_output=True, text=True, timeout=timeout)


def _first_error(stderr: str) -> str:
    """go's first line that is not progress ("go: downloading ...")."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and "downloading" not in line]
    return lines[0] if lines else "no message"


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


def cluster_producer_argv(url: str, queue: str, *flags: str) -> List[str]:
    """argv of clusterproducer (go-delayed's NewPyTask, pushed through go-redis's ClusterClient)
    enqueuing into `queue`, a tagged queue on the cluster of a redis+cluster:// URL."""
    parts = urlsplit(url)
    if parts.scheme != "redis+cluster" or parts.password or parts.query:
        raise ValueError(f"clusterproducer needs redis+cluster://host:port[,host:port...] without a password, "
                         f"not {url}")
    return [path("clusterproducer"), "-nodes", parts.netloc, "-queue", queue, *flags]


def our_worker_argv(url: str, queue: str, *flags: str) -> List[str]:
    """argv of our Go worker on `queue` (go/delayed's Worker, goworker's flags and lines, plus
    `-concurrency N`); it stops gracefully on SIGTERM, SIGINT or SIGHUP.

    A plain redis:// URL becomes `-redis host:port` (NewQueue on NewRedisPool, as a program moved from
    go-delayed connects); any other (redis+cluster://, redis+sentinel://, ...) is passed as `-url`
    (NewQueueWithClient on Connect's client)."""
    if urlsplit(url).scheme == "redis":
        where = ["-redis", redis_address(url)]
    else:
        where = ["-url", url]
    return [path("ourgoworker"), *where, "-queue", queue, *flags]


def our_client_argv(url: str, queue: str, *flags: str) -> List[str]:
    """argv of ourgoclient: one tracked task enqueued into `queue` through our Go module's client, its
    outcome awaited and printed as one JSON line (url: any Redis URL Python takes)."""
    return [path("ourgoclient"), "-url", url, "-queue", queue, *flags]


def asynq_worker_argv(url: str, queue: str, *flags: str) -> List[str]:
    """argv of an Asynq server on the Asynq queue `queue`; it stops gracefully on SIGTERM or SIGINT."""
    return [path("asynqworker"), "-redis", redis_address(url), "-queue", queue, *flags]


def asynq_producer_argv(url: str, queue: str, *flags: str) -> List[str]:
    """argv of asynqproducer enqueuing into the Asynq queue `queue` (see interop/README.md for its modes)."""
    return [path("asynqproducer"), "-redis", redis_address(url), "-queue", queue, *flags]


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
    return f"{dependency('goworker', MODULE).rsplit('-', 1)[-1][:7]} ({toolchain('goworker')})"


def dependency(command: str, module: str) -> str:
    """The version of `module` built into the command, or `?`."""
    found = re.search(r"dep\s+" + re.escape(module) + r"\s+(\S+)", _build_info(command))
    return found.group(1) if found else "?"


def toolchain(command: str) -> str:
    """The Go the command was built with (`go1.26.8`), or `go ?`."""
    found = re.search(r":\s*(go[\d.]+)", _build_info(command))
    return found.group(1) if found else "go ?"


def _build_info(command: str) -> str:
    go = shutil.which("go")
    return subprocess.run([go, "version", "-m", path(command)], capture_output=True, text=True).stdout if go else ""


def main() -> int:
    reason = build()
    if reason:
        print(reason)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
