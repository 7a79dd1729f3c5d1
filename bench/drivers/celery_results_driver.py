"""Celery with its Redis result backend on the bench's Redis, in bench/.venv-celery: the workflow
section's Celery canvas as its documentation sets it up (a chord needs a result backend, and a
chain's result is read from one). Celery's default with that backend: every task's result is
stored, and the producer subscribes to each task's result as it sends it."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import common  # noqa: E402
from celery_driver import Celery  # noqa: E402


class CeleryResults(Celery):
    environ = {"BENCH_CELERY_RESULTS": "1"}
    workflow_settings = ("the worker above, its app's `backend=` the same Redis (every task's result stored, "
                         "the producer subscribed to each); `chain(step.s(), step.s(), flow_end.s()).delay()`, "
                         "and `chord([step.s(), ...])(flow_end.s())`, the callback given the members' results")


if __name__ == "__main__":
    common.main(CeleryResults)
