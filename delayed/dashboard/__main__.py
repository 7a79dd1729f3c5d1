"""`python -m delayed.dashboard`: the dashboard's command line (delayed.dashboard.cli)."""
from .cli import main

raise SystemExit(main())
