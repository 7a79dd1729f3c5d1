"""delayed with `--log-tasks`: one INFO line per finished task (to the workers' log file), untracked tasks."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402
from delayed_driver import Delayed  # noqa: E402


class DelayedLogTasks(Delayed):
    worker_options = ["--log-tasks"]
    settings = "`python -m delayed.worker --concurrency 1|2 --log-tasks`, its log written to a file"
    io_settings = "not in the io rows: delayed's column measures the slots"


if __name__ == "__main__":
    common.main(DelayedLogTasks)
