"""Command line of `delayed contract`: parse, then write typed code from a contract (`python`) or from a
Python module's hints (`gotasks`); a problem is one line on stderr."""
import argparse
from typing import Optional, Sequence

from ...runtime.command import quiet_on_closed_pipe
from . import codegen


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="delayed contract", description="Typed code for either side of a queue "
                                  "shared with go-delayed.")
    codegen.add_parsers(top.add_subparsers(dest="action", required=True))
    return top


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`delayed contract ACTION ...`; returns the exit status."""
    def run() -> int:
        args = parser().parse_args(argv)
        return codegen.ACTIONS[args.action](args)

    return quiet_on_closed_pipe(run)
