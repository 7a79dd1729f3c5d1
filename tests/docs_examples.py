"""The code blocks of README.md and docs/, and how they run: the rules docs/development.md states.

A fenced block's language says what happens to it: `python` and `sh` blocks run in `make test`
(tests/test_docs.py), `go` blocks in `make interop` (interop/tests/test_docs_go.py), and the
languages in SHOWN are only shown. A block with `title="FILE"` is a file the page's later blocks
use: it is written, as it stands, into the page's directory. An HTML comment on the line before a
fence changes what happens to that one block:

    <!-- docs: skip REASON -->       not run; REASON is printed with the skipped test
    <!-- docs: background -->        (sh) started, and left running until the page's blocks are done;
                                     then SIGTERM (once it has run SETTLE seconds), and it must exit 0
    <!-- docs: exit N -->            (sh) must exit with status N, not 0
    <!-- docs: raises NAME -->       (python) must raise the exception class NAME
    <!-- docs: needs go -->          (sh) runs only where `go` is on the PATH, else is skipped saying so

A page's blocks run in order, in a fresh directory (on sys.path) of their own, against a Redis the
test started, as they stand: nothing in them is rewritten. $DELAYED_REDIS_URL names that Redis, in
the runner's environment and in every process it starts, and is the only way an example finds it:
`delayed.connect()`, every command of delayed, `redis-cli -u "$DELAYED_REDIS_URL"`. An example that
ignores it (`redis.Redis()`, `localhost:6379`, a bare `redis-cli`) reaches no Redis and fails, or at
least writes where the page's later blocks do not look. Python blocks share one namespace (and one
event loop, for top-level `await`); each sh block is its own `bash -eo pipefail`, with the test's
Python first on the PATH and the page's directory on PYTHONPATH.

A Python line `print(...)  # TEXT` states what it prints: the line printed must be TEXT, where `...`
stands for any text, every time the line runs, and it must run at least once. So an output a page
shows after a print is one the reader will see; a remark that is not the output goes elsewhere (the
line before, the prose). Outputs of sh blocks are not compared.

The docstrings the API reference (docs/reference/api.md) renders are pages too: the blocks of one
object's docstring and its public members' run in the same way, in order.

`python -m tests.docs_examples PAGE_OR_OBJECT --redis-url URL --directory DIR` runs one page's blocks,
or one object's (`delayed.Queue`); the tests run each in a process of its own, so none sees
another's modules, loggers or signals.
"""
import argparse
import ast
import asyncio
import builtins
import importlib
import inspect
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tokenize
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
RUN_IN_TEST = ("python", "sh")
RUN_IN_INTEROP = ("go",)
SHOWN = ("text", "json", "promql", "ini", "yaml", "toml", "lua", "diff")
DIRECTIVES = ("skip", "background", "exit", "raises", "needs")
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+) *(?P<language>[\w+-]*)(?P<attributes>.*)$")
DIRECTIVE = re.compile(r"^ *<!-- docs: (?P<name>\w+)(?: (?P<value>.*?))? *-->$")
TITLE = re.compile(r'title="(?P<title>[^"]+)"')
SHELL_TIMEOUT = 120.0
STOP_TIMEOUT = 20.0
SETTLE = 3.0
"""Seconds a background block runs at least before its SIGTERM: a process killed while the interpreter
starts, before its code takes the signal, exits -15 where a user's would not have been stopped."""


@dataclass
class Block:
    """One fenced code block of a page."""
    page: Path
    line: int  # of its first line of code, 1-based
    language: str
    source: str
    title: Optional[str] = None
    directive: Optional[Tuple[str, str]] = None  # (name, value) of the comment before its fence

    @property
    def where(self) -> str:
        return f"{shown(self.page)}:{self.line}"

    @property
    def skip_reason(self) -> Optional[str]:
        """Why this block does not run in make test's page run, or None if it does (or is a file)."""
        if self.directive and self.directive[0] == "skip":
            return self.directive[1]
        if self.directive == ("needs", "go") and shutil.which("go") is None:
            return "go is not on the PATH"
        return None


def shown(page: Path) -> str:
    """A page's path as messages and tracebacks give it: from the repository's root, where it is inside."""
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def pages() -> List[Path]:
    """README.md and every page of the site, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path) -> List[Block]:
    """The fenced code blocks of page, in order."""
    return text_blocks(page.read_text(), page, 1)


def text_blocks(text: str, page: Path, first_line: int) -> List[Block]:
    """The fenced code blocks of text, which starts at first_line of page."""
    lines = text.splitlines()
    found: List[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        end = index + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[index + 1:end]]
        title = TITLE.search(opening["attributes"])
        directive = DIRECTIVE.match(lines[index - 1]) if index else None
        found.append(Block(page, first_line + index + 1, opening["language"], "\n".join(body) + "\n",
                           title["title"] if title else None,
                           (directive["name"], directive["value"] or "") if directive else None))
        index = end + 1
    return found


def documented() -> List[str]:
    """The objects the API reference renders (its `::: dotted.path` lines), in its order."""
    text = (ROOT / "docs" / "reference" / "api.md").read_text()
    return re.findall(r"^::: ([\w.]+)", text, re.M)


def docstring_blocks(dotted: str) -> List[Block]:
    """The fenced code blocks of the docstrings of the object at dotted (as the API reference shows
    them: its own and its public members'), each placed at its line in the source file."""
    module_name, _, name = dotted.rpartition(".")
    target = getattr(importlib.import_module(module_name), name)
    members = [target, *[member for key, member in vars(target).items() if not key.startswith("_")]] \
        if inspect.isclass(target) else [target]
    found: List[Block] = []
    for member in members:
        member = getattr(member, "fget", None) or getattr(member, "__func__", None) or member
        if not (inspect.isclass(member) or inspect.isroutine(member)) or not member.__doc__:
            continue
        source, start = inspect.getsourcelines(member)
        opening = next(index for index, line in enumerate(source) if '"""' in line)
        found += text_blocks(inspect.cleandoc(member.__doc__), Path(inspect.getsourcefile(member)),
                             start + opening)
    return found


def source_blocks(source: str) -> List[Block]:
    """The blocks of a page (a path to a .md file) or of an object's docstrings (a dotted path)."""
    return blocks(Path(source)) if source.endswith(".md") else docstring_blocks(source)


def problems(block: Block) -> List[str]:
    """What is wrong with how a block is marked: an unknown language or directive, or one that does
    not fit the block's language."""
    found = []
    known = (*RUN_IN_TEST, *RUN_IN_INTEROP, *SHOWN)
    if block.language not in known:
        found.append(f"{block.where}: a block needs one of these languages: {', '.join(known)} "
                     f"(got {block.language!r})")
    if block.directive:
        name, value = block.directive
        fits = {"skip": bool(value), "background": block.language == "sh" and not value,
                "exit": block.language == "sh" and value.isdigit(),
                "raises": block.language == "python" and value.isidentifier(),
                "needs": block.language == "sh" and value == "go"}
        if name not in fits:
            found.append(f"{block.where}: unknown directive {name!r}: one of {', '.join(DIRECTIVES)}")
        elif not fits[name]:
            marker = f"{name} {value}".strip()
            found.append(f"{block.where}: `docs: {marker}` does not fit a {block.language} block")
        elif block.title and name != "skip":
            found.append(f"{block.where}: a file (title=) is written, never run: only `skip` applies")
    return found


def shown_outputs(block: Block) -> Dict[Tuple[str, int], str]:
    """The outputs a Python block states: {(its page, the line of a `print(...)  # TEXT`): TEXT}."""
    found = {}
    lines = iter(block.source.splitlines(keepends=True))
    for token in tokenize.generate_tokens(lambda: next(lines, "")):
        if token.type == tokenize.COMMENT and token.line.lstrip().startswith("print("):
            found[shown(block.page), block.line + token.start[0] - 1] = token.string[1:].strip()
    return found


def matches(shown_text: str, printed: str) -> bool:
    """Whether printed is what a page shows as shown_text, where "..." in it stands for any text."""
    pattern = ".*?".join(re.escape(part) for part in shown_text.split("..."))
    return re.fullmatch(pattern, printed, re.S) is not None


@dataclass
class OutputCheck:
    """print() for a page's Python blocks: prints as the built-in does, and holds each line that states
    its output (shown_outputs) to it; unseen() names those that never ran."""
    shown: Dict[Tuple[str, int], str] = field(default_factory=dict)
    seen: Set[Tuple[str, int]] = field(default_factory=set)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        caller = sys._getframe(1)
        where = (caller.f_code.co_filename, caller.f_lineno)
        expected = self.shown.get(where)
        if expected is None or kwargs.get("file") is not None:
            builtins.print(*args, **kwargs)
            return
        out = io.StringIO()
        builtins.print(*args, **{**kwargs, "file": out})
        sys.stdout.write(out.getvalue())
        printed = out.getvalue()[:-1] if out.getvalue().endswith("\n") else out.getvalue()
        self.seen.add(where)
        if not matches(expected, printed):
            raise AssertionError(f"{where[0]}:{where[1]}: the page shows the output {expected!r}, "
                                 f"and it printed {printed!r}")

    def unseen(self) -> List[str]:
        return [f"{page}:{line}: the page shows the output {text!r}, and the line never ran"
                for (page, line), text in sorted(self.shown.items()) if (page, line) not in self.seen]


@dataclass
class PageRun:
    """Runs the blocks of one page, or of one object's docstrings, in order in directory, against the
    Redis at url."""
    source: str
    url: str
    directory: Path
    outputs: OutputCheck = field(default_factory=OutputCheck)
    namespace: Dict[str, object] = field(default_factory=lambda: {"__name__": "__main__"})
    loop: Optional[asyncio.AbstractEventLoop] = None
    background: List[Tuple[Block, subprocess.Popen, Path, float]] = field(default_factory=list)

    def run(self) -> None:
        os.environ["DELAYED_REDIS_URL"] = self.url
        self.namespace["print"] = self.outputs
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chdir(self.directory)
        sys.path.insert(0, str(self.directory))
        try:
            for block in source_blocks(self.source):
                self.run_block(block)
        finally:
            self.stop_background()
            if self.loop is not None:
                self.loop.close()
        unseen = self.outputs.unseen()
        if unseen:
            raise AssertionError("\n".join(unseen))

    def run_block(self, block: Block) -> None:
        if block.skip_reason is not None:
            return
        if block.title:
            path = self.directory / block.title
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.source)
        elif block.language == "python":
            self.outputs.shown.update(shown_outputs(block))
            self.run_python(block)
        elif block.language == "sh":
            self.run_shell(block)

    def run_python(self, block: Block) -> None:
        # padded so that a traceback names the page's own line numbers
        code = compile("\n" * (block.line - 1) + block.source, shown(block.page), "exec",
                       flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        expected = block.directive[1] if block.directive and block.directive[0] == "raises" else None
        try:
            result = eval(code, self.namespace)
            if asyncio.iscoroutine(result):
                if self.loop is None:
                    self.loop = asyncio.new_event_loop()
                self.loop.run_until_complete(result)
        except Exception as exc:
            if expected is None or expected not in [cls.__name__ for cls in type(exc).__mro__]:
                raise
            print(f"{block.where}: raised {type(exc).__name__}: {exc}", flush=True)
            return
        if expected is not None:
            raise AssertionError(f"{block.where}: the block should raise {expected}, and raised nothing")

    def environment(self) -> Dict[str, str]:
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        return dict(os.environ, DELAYED_REDIS_URL=self.url, PATH=path, PYTHONPATH=str(self.directory))

    def run_shell(self, block: Block) -> None:
        command = ["bash", "-eo", "pipefail", "-c", block.source]
        if block.directive == ("background", ""):
            log = self.directory / f".background-{block.line}.log"
            with log.open("w") as out:
                process = subprocess.Popen(command, cwd=self.directory, env=self.environment(), stdout=out,
                                           stderr=subprocess.STDOUT, start_new_session=True)
            self.background.append((block, process, log, time.monotonic()))
            return
        expected = int(block.directive[1]) if block.directive and block.directive[0] == "exit" else 0
        done = subprocess.run(command, cwd=self.directory, env=self.environment(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace", timeout=SHELL_TIMEOUT)
        sys.stdout.write(done.stdout)
        if done.returncode != expected:
            raise AssertionError(f"{block.where}: the sh block exited {done.returncode}, not {expected}:\n"
                                 f"{block.source}{done.stdout}")

    def stop_background(self) -> None:
        """SIGTERM every background block (its whole process group) and wait; each must exit 0."""
        failures = []
        for block, process, log, started in self.background:
            time.sleep(max(0.0, started + SETTLE - time.monotonic()))
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
            try:
                status = process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                status = process.wait()
                failures.append(f"{block.where}: did not stop within {STOP_TIMEOUT:.0f} s of SIGTERM")
            if status != 0:
                failures.append(f"{block.where}: the background block exited {status}")
            sys.stdout.write(f"--- {block.where} (background) ---\n{log.read_text(errors='replace')}")
        self.background.clear()
        if failures:
            raise AssertionError("\n".join(failures))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Run the python and sh blocks of one page (PAGE.md), or of the "
                                                 "docstrings of one object the API reference shows (delayed.Queue), "
                                                 "against a Redis.")
    parser.add_argument("source", metavar="PAGE_OR_OBJECT")
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--directory", type=Path, required=True)
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        source = str(Path(args.source).resolve()) if args.source.endswith(".md") else args.source
        PageRun(source, args.redis_url, args.directory.resolve()).run()
    except Exception:
        traceback.print_exc()
        return 1
    print(f"{args.source}: every block ran in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # whatever threads a page's examples left behind
