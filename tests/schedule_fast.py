"""A schedule for the tests: one entry ticking every second, the shortest an entry may."""
from delayed.scheduler import Periodic

SCHEDULE = [Periodic("tests.tasks:record", queue="periodic", every=1)]
