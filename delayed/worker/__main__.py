"""`python -m delayed.worker`: the worker's command line (delayed.cli), kept out of the worker itself."""
from ..cli import worker_main

raise SystemExit(worker_main())
