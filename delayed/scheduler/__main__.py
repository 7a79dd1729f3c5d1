"""`python -m delayed.scheduler`: the scheduler's command line (delayed.cli), kept out of the scheduler itself."""
from ..cli import scheduler_main

raise SystemExit(scheduler_main())
