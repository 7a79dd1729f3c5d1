"""`python -m delayed.worker`: its command line (delayed.worker.cli), kept out of the worker itself."""
from .cli import main

raise SystemExit(main())
