"""The short chaos runs (`make chaos` runs the long ones): nothing lost, duplicates bounded."""
import pytest

from .chaos import run


@pytest.mark.parametrize("scenario", ["restart", "client-kill"])
def test_chaos_loses_nothing(scenario):
    tally = run(tasks=3000, workers=3, scenario=scenario, timeout=90)
    assert tally.errors == []
    assert tally.killed >= 3
    assert tally.redis_restarts >= 1 if scenario == "restart" else tally.client_kills >= 1
