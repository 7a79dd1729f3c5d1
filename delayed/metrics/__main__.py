"""`python -m delayed.metrics`: the queue exporter's command line (delayed.metrics.cli)."""
from .cli import main

raise SystemExit(main())
