"""`delayed contract python` and `delayed contract gotasks`: their arguments, and the calls they make
to write typed code for either side of a queue; `delayed contract`'s cli.py adds them to its parser."""
import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict

from ...contract.gotasks import go_tasks, task_functions
from ...contract.python_module import python_module
from ...errors import ContractError
from ...runtime.command import CommandError


def add_parsers(actions: Any) -> None:
    """The two actions' parsers, on `delayed contract`'s subparsers."""
    python = actions.add_parser("python", help="a typed Python module: one GoTask function per handler of a "
                                "contract, checked by it", description="Write a module with one function per "
                                "handler of CONTRACT, returning its GoTask as the contract checks it, and a TypedDict "
                                "per Go struct, for mypy. Exit status: 0 written, 2 the contract cannot be read.")
    python.add_argument("contract", metavar="CONTRACT", help="the contract file `delayed contract go` wrote")
    python.add_argument("-o", "--output", required=True, metavar="MODULE.py", help="the Python module to write")
    gotasks = actions.add_parser("gotasks", help="a Go file: one typed PyTask constructor per public function "
                                 "of a Python module, from its type hints", description="Write a Go file with one "
                                 "constructor per public module-level function of MODULE, typed by its hints. Exit "
                                 "status: 0 written, 2 MODULE does not import or a hint has no Go type (all listed).")
    gotasks.add_argument("module", metavar="MODULE", help="an importable module, e.g. tasks")
    gotasks.add_argument("--func", action="append", metavar="NAME",
                         help="only this function (repeatable; default: every public one)")
    gotasks.add_argument("--package", required=True, help="the Go file's package name")
    gotasks.add_argument("-o", "--output", required=True, metavar="FILE.go", help="the Go file to write")


def _python(args: argparse.Namespace) -> None:
    try:
        data = json.loads(Path(args.contract).read_text())
    except (OSError, ValueError) as exc:
        raise ContractError(f"cannot read the contract {args.contract}: {exc}") from None
    Path(args.output).write_text(python_module(data, args.contract))


def _gotasks(args: argparse.Namespace) -> None:
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does, so ./tasks.py imports
    try:
        module = importlib.import_module(args.module)
    except Exception as exc:
        raise ContractError(f"cannot import {args.module}: {type(exc).__name__}: {exc}") from None
    command = " ".join(["delayed contract gotasks", args.module, *(f"--func {name}" for name in args.func or ()),
                        "--package", args.package])
    Path(args.output).write_text(go_tasks(task_functions(module, args.func), args.package, command))


def _reported(action: Callable[[argparse.Namespace], None]) -> Callable[[argparse.Namespace], int]:
    """action, returning its exit status: 0, or a CommandError of status 2 for its ContractError (one line on
    stderr)."""
    def run(args: argparse.Namespace) -> int:
        try:
            action(args)
        except ContractError as exc:
            raise CommandError(str(exc), status=2) from None
        return 0

    return run


ACTIONS: Dict[str, Callable[[argparse.Namespace], int]] = {"python": _reported(_python),
                                                           "gotasks": _reported(_gotasks)}
