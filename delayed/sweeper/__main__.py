"""`python -m delayed.sweeper`: the sweeper's command line (delayed.cli), kept out of the sweeper itself."""
from ..cli import sweeper_main

raise SystemExit(sweeper_main())
