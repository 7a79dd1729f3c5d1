"""A schedule for the tests: one entry ticking five times a second."""
from delayed.scheduler import Periodic

SCHEDULE = [Periodic("tests.tasks:record", queue="periodic", every=0.2)]
