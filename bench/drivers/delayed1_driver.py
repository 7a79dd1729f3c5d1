"""delayed with `--batch 1`: one task claimed per round trip, so a killed worker leaves at most
one finished-but-unreleased task to run again (the default batch allows up to 32)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402
from delayed_driver import Delayed  # noqa: E402


class DelayedBatch1(Delayed):
    worker_options = ["--batch", "1"]
    settings = "`python -m delayed.worker --concurrency 1|2 --batch 1`"
    io_settings = "not in the io rows: delayed's column measures the slots"


if __name__ == "__main__":
    common.main(DelayedBatch1)
