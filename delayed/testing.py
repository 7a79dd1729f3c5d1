"""A throwaway redis-server on a free loopback port, for tests and demos (yours too)."""
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import List, Optional

import redis


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """One redis-server process; stop() and start() again keep its port (a restart)."""

    def __init__(self, directory: Path, extra_args: Optional[List[str]] = None) -> None:
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not on PATH (`make test` and `make demo` install it)")
        self.directory = directory
        self.port = free_port()
        self.extra_args = extra_args or []
        self.process: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.directory), *self.extra_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"redis-server did not start on port {self.port}")
                time.sleep(0.02)
        client.close()
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
