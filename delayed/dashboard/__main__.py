"""`python -m delayed.dashboard`: the dashboard's command line (delayed.ops.dashboard.cli)."""
from ..ops.dashboard.cli import main

raise SystemExit(main())
