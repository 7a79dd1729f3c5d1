"""A --concurrency supervisor for tests, with hooks that hold its race windows open for seconds.

    python -m tests.supervised --redis-url URL --pid-dir DIR [--slow-build SLOT] [--slow-fork SLOT]

Each child writes DIR/<slot>.pid as it starts building its worker. --slow-build: that slot's
worker takes 3 s to build (the window in which a child still ran the supervisor's handler).
--slow-fork: the supervisor sleeps 2 s right after forking that slot, before it can record the
child (it writes DIR/forked first).
"""
import argparse
import logging
import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import List

from delayed import Queue, Worker
from delayed.logger import TEXT_FORMAT
from delayed.protocol.connection import connect
from delayed.worker.supervisor import Supervisor


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--pid-dir", required=True, type=Path)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--slow-build", type=int, default=-1)
    parser.add_argument("--slow-fork", type=int, default=-1)
    args = parser.parse_args()
    logging.basicConfig(level="INFO", format=TEXT_FORMAT)
    forks: List[int] = []

    def after_fork_in_parent() -> None:
        forks.append(len(forks))
        if forks[-1] == args.slow_fork:
            (args.pid_dir / "forked").write_text("")
            time.sleep(2)

    os.register_at_fork(after_in_parent=after_fork_in_parent)

    def make_worker() -> Worker:
        slot = int(multiprocessing.current_process().name.rsplit("-", 1)[1])
        (args.pid_dir / f"{slot}.pid").write_text(str(os.getpid()))
        if slot == args.slow_build:
            time.sleep(3)
        return Worker(Queue("default", connect(args.redis_url)), ["tests.tasks"],
                      keep_alive_interval=0.25, batch=1, keep_alive_timeout=1)

    return Supervisor(make_worker, args.concurrency).run()


if __name__ == "__main__":
    sys.exit(main())
