"""`python -m delayed.metrics`: the queue exporter's command line (delayed.ops.metrics.cli)."""
from ..ops.metrics.cli import main

raise SystemExit(main())
