"""A schedule whose module takes its time to import (tests.slow_import): the window before a scheduler is built."""
from delayed.scheduler import Periodic

from . import slow_import  # noqa: F401

SCHEDULE = [Periodic("tests.tasks:record", queue="periodic", every=1)]
