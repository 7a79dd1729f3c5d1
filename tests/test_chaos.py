"""The short chaos runs (`make chaos` runs the long ones): nothing lost, duplicates bounded; and
what a SIGKILL of Redis loses under the persistence settings docs/guarantees.md names."""
import pytest

from .chaos import AOF_ALWAYS, RDB_DEFAULT, Case, contradiction, run, run_case

KILL_AT = 4  # s: before RDB_DEFAULT's first snapshot


@pytest.mark.parametrize("scenario", ["restart", "client-kill"])
def test_chaos_loses_nothing(scenario):
    tally = run(tasks=3000, workers=3, scenario=scenario, timeout=90)
    assert tally.errors == []
    assert tally.killed >= 3
    assert tally.redis_restarts >= 1 if scenario == "restart" else tally.client_kills >= 1


def test_aof_always_loses_no_acknowledged_enqueue():
    case = Case("AOF, appendfsync always", AOF_ALWAYS, KILL_AT, 0)
    survival = run_case(case)
    assert survival.acknowledged >= 100
    assert survival.lost == 0
    assert contradiction(case, survival) is None


def test_rdb_default_loses_every_enqueue_before_its_first_snapshot():
    case = Case("RDB, default save points", RDB_DEFAULT, KILL_AT, None)
    survival = run_case(case)
    assert survival.acknowledged >= 100
    assert survival.lost == survival.acknowledged
    assert contradiction(case, survival) is None
    assert contradiction(case._replace(may_lose=0), survival)  # the scenario's check sees a loss
