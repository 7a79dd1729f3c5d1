"""A throwaway redis-server on a free loopback port, and a poll-until helper, for tests and demos
(yours too)."""
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, List, Optional


def wait_for(condition: Callable[[], Any], timeout: float = 10, what: str = "condition",
             interval: float = 0.02) -> Any:
    """Poll condition until it is truthy and return its value; AssertionError after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """One redis-server process; stop() and start() again keep its port (a restart).

    extra_args are passed to redis-server (e.g. ["--requirepass", "secret"]); readiness is
    read from its log, so it works whatever authentication or TLS they set up.
    """

    def __init__(self, directory: Path, extra_args: Optional[List[str]] = None) -> None:
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not on PATH (`make test` and `make demo` install it)")
        self.directory = Path(directory)
        self.port = free_port()
        self.extra_args = extra_args or []
        self.log = self.directory / f"redis-{self.port}.log"
        self.process: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        self.log.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.directory), "--logfile", str(self.log), *self.extra_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not (self.log.exists() and "Ready to accept connections" in self.log.read_text(errors="replace")):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {self.port}; see {self.log}")
            time.sleep(0.02)
        return self

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None
