"""`python -m delayed.sweeper`: its command line (delayed.sweeper.cli), kept out of the sweeper itself."""
from .cli import main

raise SystemExit(main())
