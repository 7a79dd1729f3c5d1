"""How commands are made: each is one registration, its parser and its handler together (a Command in
its cli.py, or an operation of `delayed` in delayed/ops/cli.py), so a command is added in one place and
`delayed NAME`, `python -m delayed.NAME` and a console script run the same one."""
import ast
import importlib
import importlib.metadata
import re

import pytest

from delayed.ops import cli as ops
from delayed.runtime.command import Command

from .conftest import ROOT

PARSERS_MADE_IN = {"delayed/runtime/command.py", "delayed/ops/cli.py"}
"""Where an ArgumentParser is made: Command.parser, and `delayed`'s own (its front, its common options and
the parser of its operations)."""


def test_no_command_line_makes_a_parser_of_its_own():
    made = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in sorted((ROOT / "delayed").rglob("*.py"))
            if str(path.relative_to(ROOT)) not in PARSERS_MADE_IN
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "ArgumentParser"]
    assert made == [], "a command line is a Command (delayed.runtime.command) or an operation of delayed.ops.cli"


@pytest.mark.parametrize("name", sorted(ops.PROGRAMS))
def test_a_program_is_one_command_however_it_is_started(name):
    program = ops.PROGRAMS[name]
    module = importlib.import_module(program.run.__module__)
    assert isinstance(program, Command) and module.COMMAND is program
    assert module.main == program.main and module.parser == program.parser
    scripts = [script for script in importlib.metadata.entry_points(group="console_scripts")
               if script.value.startswith(program.run.__module__ + ":")]
    assert all(script.load() == program.main for script in scripts)
    if program.prog.startswith("python -m "):
        main_module = (ROOT / program.prog.split()[-1].replace(".", "/") / "__main__.py").read_text()
        assert re.search(r"^from \S+cli import main$", main_module, re.M), main_module


def test_delayed_offers_and_names_each_command_it_registers():
    front = ops.front_parser()
    [command] = [action for action in front._actions if action.dest == "command"]
    assert list(command.choices) == [*ops.OPERATIONS, *ops.PROGRAMS]
    listed = set(re.findall(r"[a-z]+", front.epilog.split("`delayed COMMAND --help`")[0]))
    assert [name for name in command.choices if name not in listed] == []
    subcommands = {action.dest: action for action in ops.parser()._actions}["command"].choices
    assert list(subcommands) == list(ops.OPERATIONS)
