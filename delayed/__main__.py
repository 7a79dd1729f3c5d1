"""`python -m delayed`: the `delayed` command (delayed.ops.cli)."""
from .ops.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
