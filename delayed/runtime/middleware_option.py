"""`--middleware MODULE:ATTR`: the `delayed.Middleware` a command line runs (a worker's, an enqueue's),
named as a task's function is: ATTR is an instance, or a factory called with no argument (a class)."""
import argparse
import importlib
import os
import sys
from typing import Callable, List, Sequence

from ..wire.hooks import Middleware
from .command import CommandError

Maker = Callable[[], Middleware]
"""Makes one middleware: a factory, or what gives the one instance a module holds."""


def add_middleware_option(parser: argparse.ArgumentParser, around: str) -> None:
    """--middleware, repeatable; around: what its hooks run around ("each task's call")."""
    parser.add_argument("--middleware", action="append", default=[], metavar="MODULE:ATTR",
                        help=f"a delayed.Middleware whose hooks run around {around}: ATTR is an instance, or a "
                             "factory called with no argument (a class); repeat for several, the first one outermost")


def makers_of(specs: Sequence[str]) -> List[Maker]:
    """What makes each named middleware, imported now (from the working directory too, as `python -m`
    imports); a CommandError (exit 2) says in one line why one cannot be had: not MODULE:ATTR, a module
    that fails to import, no such attribute, or one that is neither a Middleware nor callable."""
    if specs and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return [_maker(spec) for spec in specs]


def _maker(spec: str) -> Maker:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise CommandError(f"--middleware {spec}: give MODULE:ATTR, e.g. myapp.tracing:Tracing", status=2)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the operator's code, failing as it imports: one line, not a traceback
        detail = " ".join(str(exc).split())
        raise CommandError(f"--middleware {spec}: cannot import {module_name}: {type(exc).__name__}: {detail}",
                           status=2) from None
    try:
        found = getattr(module, attr)
    except AttributeError:
        raise CommandError(f"--middleware {spec}: {module_name} has no attribute {attr!r}", status=2) from None
    if isinstance(found, Middleware):
        return lambda: found
    if not callable(found):
        raise CommandError(f"--middleware {spec}: a {type(found).__name__}, not a delayed.Middleware, nor a "
                           "factory of one", status=2)
    return lambda: _checked(spec, found())


def _checked(spec: str, made: object) -> Middleware:
    if not isinstance(made, Middleware):
        raise CommandError(f"--middleware {spec} made a {type(made).__name__}, not a delayed.Middleware", status=2)
    return made


def made(makers: Sequence[Maker]) -> List[Middleware]:
    """One middleware of each maker (a factory is called: once per worker process)."""
    return [make() for make in makers]
