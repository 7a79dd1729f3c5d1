"""MkDocs hook: the references made from the code, not copied into the pages.

A page line `<!-- reference: NAME -->` becomes:
- `cli`: every command's usage and options, read from the argparse parsers `--help` prints;
- `worker-metrics`, `queue-metrics`: a table of the metric families a worker's and the exporter's
  /metrics expose, from their declarations (delayed.worker.metrics.SERIES, delayed.ops.metrics.queues.SERIES);
- `go-api`: the Go module's package, from its doc comments (`go doc -all`).
"""
import argparse
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from typing import Callable, Dict, Iterator, List, Sequence, Set, Tuple

MARKER = re.compile(r"^<!-- reference: (?P<name>[\w-]+) -->$", re.M)
WIDTH = "80"  # columns for the usage lines (what the page shows without scrolling), whatever the terminal


def on_page_markdown(markdown: str, page, config, files) -> str:
    def render(match: "re.Match[str]") -> str:
        if match["name"] not in RENDERERS:
            raise ValueError(f"{page.file.src_path}: unknown reference {match['name']!r}: one of {', '.join(RENDERERS)}")
        return RENDERERS[match["name"]]()

    return MARKER.sub(render, markdown)


# The command line


def _cell(text: str) -> str:
    """text fit for a table cell: one line, pipes escaped, and markdown's own characters left as text."""
    text = " ".join(text.split()).replace("|", "\\|")
    return re.sub(r"([*_<\[\]])", r"\\\1", text)


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[Tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand of parser, in the order --help lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _options(parser: argparse.ArgumentParser, shared: Set[str]) -> List[Tuple[str, str]]:
    """(invocation as --help shows it, help) of parser's own arguments, those in shared left out."""
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
            continue
        if set(action.option_strings) & shared:
            continue
        help_text = formatter._expand_help(action) if action.help else ""
        rows.append((formatter._format_action_invocation(action), help_text))
    return rows


def _table(rows: List[Tuple[str, str]]) -> List[str]:
    """The markdown table of (invocation, help) rows, and the blank line after it."""
    return ["| argument | what it does |", "|---|---|",
            *[f"| `{invocation}` | {_cell(help_text)} |" for invocation, help_text in rows], ""]


def _command(title: str, parser: argparse.ArgumentParser, summary: str, shared: Set[str], level: int) -> List[str]:
    """The section of one command, and of its subcommands after it."""
    lines = [f"{'#' * level} `{title}`", ""]
    description = parser.description or summary
    if description:
        lines += [description, ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    rows = _options(parser, shared)
    if rows:
        lines += _table(rows)
    taken = shared & {option for action in parser._actions for option in action.option_strings}
    if taken == shared:
        lines += ["It also takes the [connection options](#connection-options).", ""]
    elif taken:  # a command that never reaches Redis takes the log options alone
        lines += [f"It also takes {' and '.join(f'`{option}`' for option in sorted(taken))} (see "
                  "[connection options](#connection-options)).", ""]
    for name, help_text, sub in _subcommands(parser):
        lines += _command(f"{title} {name}", sub, help_text, shared, level + 1)
    return lines


def _commands() -> List[Tuple[str, str, argparse.ArgumentParser]]:
    """(title, what else runs it, parser) of each program `delayed` runs (delayed.ops.cli.PROGRAMS), in its
    order: one started as `python -m delayed.NAME` also runs as `delayed NAME`, and as the console scripts
    setup.cfg points at its main."""
    from delayed.ops import cli as ops

    scripts = importlib.metadata.entry_points(group="console_scripts")
    commands = []
    for name, program in ops.PROGRAMS.items():
        if program.prog == f"delayed {name}":
            commands.append((program.prog, "", program.parser()))
            continue
        module = program.run.__module__
        also = [f"`delayed {name}`", *(f"`{script.name}`" for script in scripts if script.value == f"{module}:main")]
        commands.append((program.prog, "also " + " and ".join(also), program.parser()))
    return commands


def _connection_options() -> Tuple[Set[str], List[str]]:
    """The option strings every Redis-reaching command shares, and their section."""
    from delayed.runtime.command import add_connection_options

    parser = argparse.ArgumentParser(prog="COMMAND", add_help=False)
    add_connection_options(parser)
    shared = {option for action in parser._actions for option in action.option_strings}
    return shared, ["## Connection options", "",
                    "Every command that reaches Redis takes these, `delayed`'s before its command name or after it; "
                    "`delayed contract`, which never does, takes `--log-level` and `--log-format`.",
                    "", *_table(_options(parser, set()))]


def cli() -> str:
    os.environ["COLUMNS"] = WIDTH
    from delayed.ops import cli as ops

    shared, lines = _connection_options()
    front = ops.front_parser()
    lines += [*_command("delayed", front, "", shared, 2), front.epilog or "", ""]
    for name, help_text, sub in _subcommands(ops.parser()):
        lines += _command(f"delayed {name}", sub, help_text, shared, 3)
    for title, also, parser in _commands():
        section = _command(title, parser, "", shared, 2)
        if also:
            section[2:2] = [f"({also}, with the same arguments)", ""]
        lines += section
    return "\n".join(lines)


# Metrics


def _metrics_table(series: Sequence) -> str:
    lines = ["| metric | type | labels | what it counts |", "|---|---|---|---|"]
    for entry in series:
        labels = ", ".join(f"`{label}`" for label in entry.labels)
        lines.append(f"| `{entry.name}` | {entry.kind} | {labels} | {_cell(entry.help)} |")
    return "\n".join(lines) + "\n"


def worker_metrics() -> str:
    from delayed.worker.metrics import SERIES

    return _metrics_table(SERIES)


def queue_metrics() -> str:
    from delayed.ops.metrics.queues import SERIES

    return _metrics_table(SERIES)


# The Go API

GO_PACKAGE = "./delayed"
"""The Go module's package, as `go doc` names it from go/."""
_GO_SECTIONS = {"CONSTANTS": "Constants", "VARIABLES": "Variables", "FUNCTIONS": "Functions", "TYPES": "Types"}
_GO_NAME = re.compile(r"^(?:func (?:\([^)]*\) )?|type )(\w+)")


def _go_doc() -> str:
    """`go doc -all` of the package, run in go/; without Go, a note saying the reference was not made (and a
    line on stderr saying so: the build goes on, loudly)."""
    go_dir = os.path.join(os.path.dirname(__file__), "..", "..", "go")
    if shutil.which("go") is None:
        print("!!!!!!!! GO API REFERENCE NOT GENERATED: no go command on PATH !!!!!!!!", file=sys.stderr)
        return ""
    return subprocess.run(["go", "doc", "-all", GO_PACKAGE], cwd=go_dir, capture_output=True, text=True,
                          check=True).stdout


def _go_blocks(text: str) -> Iterator[Tuple[str, List[str], List[str]]]:
    """(section, declaration lines, doc lines) for each declaration `go doc -all` prints, in its order; the
    package's own comment is the section "" (no declaration)."""
    section, code, doc = "", [], []  # type: Tuple[str, List[str], List[str]]
    for line in text.splitlines()[1:]:
        if line in _GO_SECTIONS:
            if code or doc:
                yield section, code, doc
            section, code, doc = line, [], []
        elif line.startswith("    ") or (not line and doc):
            doc.append(line[4:])
        elif line and section:
            if doc:
                yield section, code, doc
                code, doc = [], []
            code.append(line)
        elif line:
            doc.append(line)
    if code or doc:
        yield section, code, doc


def go_api() -> str:
    text = _go_doc()
    if not text:
        return ("!!! warning\n    This reference is made by `go doc` from the Go module's doc comments, and Go was not "
                "installed where this site was built.\n")
    lines: List[str] = []
    current = ""
    for section, code, doc in _go_blocks(text):
        if section != current:
            lines += [f"## {_GO_SECTIONS[section]}", ""]
            current = section
        if code and section in ("FUNCTIONS", "TYPES") and _GO_NAME.match(code[0]):
            lines += [f"### {_go_heading(code[0])}", ""]
        if code:
            lines += ["```go", *code, "```", ""]
        paragraphs = "\n".join(line if line.startswith(("    ", "\t")) else re.sub(r"([*_<\[\]])", r"\\\1", line)
                               for line in doc).strip()  # a doc comment's code block stays as it is
        if paragraphs:
            lines += [paragraphs, ""]
    return "\n".join(lines)


def _go_heading(declaration: str) -> str:
    """What a declaration's heading says: its name, `Type.Method` for a method."""
    name = _GO_NAME.match(declaration)[1]  # type: ignore[index]
    if not declaration.startswith("func ("):
        return name
    receiver = declaration[declaration.index("(") + 1:declaration.index(")")].split()[-1].lstrip("*")
    return f"{receiver}.{name}"


RENDERERS: Dict[str, Callable[[], str]] = {"cli": cli, "worker-metrics": worker_metrics,
                                           "queue-metrics": queue_metrics, "go-api": go_api}
