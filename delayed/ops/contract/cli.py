"""Command line of `delayed contract`: parse, then read Go code into a contract file (`go`), check
that file against the Go code (`check`), or write typed code from a contract (`python`) or from a
Python module's hints (`gotasks`); a problem is one line on stderr."""
import argparse
import sys

from ...contract import golang
from ...runtime.command import Command, CommandError
from . import codegen

GO_STATUS = "Exit status: 0 written, 1 the Go package could not be read, 2 Go is not on the PATH."
CHECK_STATUS = ("Exit status: 0 the contract matches the Go code, 1 it does not (a unified diff on stdout) or "
                "the Go package could not be read, 2 Go is not on the PATH.")


def _arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True)
    make = actions.add_parser("go", help="read a Go package's handlers into a contract (JSON)",
                              description="Write the parameter types of the top-level functions of the Go "
                                          "package in DIR, as go-delayed names them (main.Add), and why go-delayed "
                                          "cannot call the others. " + GO_STATUS)
    make.add_argument("dir", metavar="DIR", help="the Go package's directory (its module's go.mod applies)")
    make.add_argument("--func", action="append", default=[], dest="funcs", metavar="NAME",
                      help="only this function, as Add or main.Add (repeatable; default: every one)")
    make.add_argument("-o", "--output", metavar="FILE", help="write it here (default: stdout)")
    check = actions.add_parser("check", help="exit 1 with a diff if the Go code no longer matches the contract",
                               description="Read the Go package in DIR again and compare it with CONTRACT: a CI "
                                           "step for a repository with Go handlers and Python producers. " + CHECK_STATUS)
    check.add_argument("contract", metavar="CONTRACT", help="the contract file `delayed contract go` wrote")
    check.add_argument("dir", metavar="DIR", help="the Go package's directory")
    check.add_argument("--func", action="append", default=[], dest="funcs", metavar="NAME",
                       help="as given to `delayed contract go` (repeatable)")
    codegen.add_parsers(actions)


def _run(args: argparse.Namespace) -> int:
    try:
        return _act(args)
    except golang.GoReaderError as exc:
        raise CommandError(str(exc), exc.status) from None
    except OSError as exc:  # the contract file to check, or to write, cannot be read or written
        raise CommandError(str(exc)) from None


def _act(args: argparse.Namespace) -> int:
    if args.action in codegen.ACTIONS:
        return codegen.ACTIONS[args.action](args)
    if args.action == "go":
        text = golang.dumps(golang.read_package(args.dir, args.funcs))
        if args.output:
            with open(args.output, "w") as out:
                out.write(text)
        else:
            sys.stdout.write(text)
        return 0
    diff = golang.drift(args.contract, args.dir, args.funcs)
    if diff is None:
        return 0
    sys.stdout.write(diff)
    return 1


COMMAND = Command("delayed contract", "delayed contract",
                  "The parameter types of go-delayed handlers, read from Go code into a JSON contract that Python "
                  "producers check GoTasks against, and typed code for either side of a queue shared with go-delayed.",
                  _arguments, _run, connects=False)
parser = COMMAND.parser
main = COMMAND.main
