"""`python -m delayed.scheduler`: its command line (delayed.scheduler.cli), kept out of the scheduler itself."""
from .cli import main

raise SystemExit(main())
