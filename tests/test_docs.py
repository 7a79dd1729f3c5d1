"""The manual's examples run, and the manual is whole.

Every python and sh block of README.md and docs/, and of the docstrings the API reference shows,
runs, page by page (object by object), against a redis-server this session started, which
$DELAYED_REDIS_URL names (tests/docs_examples.py states the rules: files, markers, shown outputs);
a block marked `skip` is reported as a skipped test with its reason. The site builds
strictly (`make docs`'s settings), and its generated references cover what the code has: every
argument `--help` prints, every name `from delayed import` gives, every metric family.
"""
import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
import redis

import delayed

from . import docs_examples
from .conftest import ROOT

SOURCES = {**{str(page.relative_to(ROOT)): docs_examples.blocks(page) for page in docs_examples.pages()},
           **{dotted: docs_examples.docstring_blocks(dotted) for dotted in docs_examples.documented()}}
"""Each page (its path from the root) and each object the API reference shows (its dotted path): its blocks."""
BLOCKS = [block for blocks in SOURCES.values() for block in blocks]
RUN = [source for source, blocks in SOURCES.items()
       if any(block.language in docs_examples.RUN_IN_TEST and block.skip_reason is None and not block.title
              for block in blocks)]
SKIPPED = [block for block in BLOCKS if block.language in docs_examples.RUN_IN_TEST and block.skip_reason is not None]
PAGE_TIMEOUT = 300


def test_every_block_is_marked_so_that_it_runs_or_is_shown():
    assert [problem for block in BLOCKS for problem in docs_examples.problems(block)] == []


@pytest.mark.timeout(PAGE_TIMEOUT + 30)
@pytest.mark.parametrize("source", RUN)
def test_the_examples_of_a_page_run(source, redis_server, tmp_path):
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    for user in client.acl_users():  # a page may add ACL users (deployment.md does), which FLUSHALL keeps
        if user != "default":
            client.acl_deluser(user)
    client.close()
    done = run_page(source, redis_server, tmp_path)
    assert done.returncode == 0, done.stdout


@pytest.mark.parametrize("block", SKIPPED, ids=lambda block: block.where)
def test_a_block_marked_skip(block):
    pytest.skip(f"{block.where}: {block.skip_reason}")


def run_page(page, redis_server, directory: Path) -> subprocess.CompletedProcess:
    """Run the blocks of page (a path to a .md file) or of an object's docstrings (a dotted path)."""
    return subprocess.run([sys.executable, "-m", "tests.docs_examples", str(page), "--redis-url", redis_server.url,
                           "--directory", str(directory)], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=PAGE_TIMEOUT)


FENCE = "`" * 3


@pytest.mark.parametrize("body, says", [
    ("python\nfrom delayed import connect\nconnect().set('seen', 1)\nraise RuntimeError('broken example')",
     "page.md\", line 6"),
    ("sh\nredis-cli -u \"$DELAYED_REDIS_URL\" set seen 1 && printf '\\xc1 not UTF-8\\n' && false", "exited 1, not 0"),
    ("python\nfrom delayed import connect\nconnect().set('seen', 1)\n" + FENCE + "\n<!-- docs: raises KeyError -->\n"
     + FENCE + "python\n{}['a'] + 1",
     None),
])
def test_the_runner_fails_a_page_whose_example_breaks(body, says, redis_server, tmp_path):
    """A page whose block raises or exits non-zero fails, naming the page and the line; the blocks
    before it ran against the test's Redis. (The third page passes: its KeyError is expected.)"""
    page = tmp_path / "page.md"
    page.write_text(f"# A page\n\n{FENCE}{body}\n{FENCE}\n")
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    done = run_page(page, redis_server, tmp_path / "run")
    assert client.get("seen") == b"1"
    if says is None:
        assert done.returncode == 0, done.stdout
    else:
        assert done.returncode == 1 and says in done.stdout, done.stdout


@pytest.mark.parametrize("body", [
    "python\nimport redis\nredis.Redis().set('seen', 1)",
    "python\nimport redis.asyncio\nawait redis.asyncio.Redis().set('seen', 1)",
    "python\nimport redis\nredis.Redis.from_url('redis://localhost:6379/0').set('seen', 1)",
    "sh\nredis-cli set seen 1",
    "sh\nredis-cli -h 127.0.0.1 -p 6379 set seen 1",
])
def test_an_example_that_ignores_delayed_redis_url_fails_its_page(body, redis_server, tmp_path):
    """The runner rewrites nothing: an example that names the default Redis, not $DELAYED_REDIS_URL,
    reaches no Redis (none answers on localhost:6379 here: checked, so that the failure is real),
    and writes nothing to the test's."""
    with pytest.raises(redis.ConnectionError):
        redis.Redis(socket_connect_timeout=2).ping()
    page = tmp_path / "page.md"
    page.write_text(f"# A page\n\n{FENCE}{body}\n{FENCE}\n")
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    done = run_page(page, redis_server, tmp_path / "run")
    assert done.returncode == 1, done.stdout
    assert client.get("seen") is None


@pytest.mark.parametrize("lines, says", [
    ("print(1 + 2)  # 3\nprint('task', 'a1b2', 'failed')  # task ... failed\nfor n in (1, 1):\n    print(n)  # 1",
     None),
    ("print(1 + 2)  # 4", "page.md:4: the page shows the output '4', and it printed '3'"),
    ("print('task a1b2 failed')  # task ... done", "the page shows the output 'task ... done', and it printed"),
    ("if False:\n    print(1)  # 1", "page.md:5: the page shows the output '1', and the line never ran"),
])
def test_a_print_s_comment_is_the_output_it_shows(lines, says, redis_server, tmp_path):
    """`print(...)  # TEXT` must print TEXT ("..." standing for any text), each time, at least once."""
    page = tmp_path / "page.md"
    page.write_text(f"# A page\n\n{FENCE}python\n{lines}\n{FENCE}\n")
    done = run_page(page, redis_server, tmp_path / "run")
    if says is None:
        assert done.returncode == 0, done.stdout
    else:
        assert done.returncode == 1 and says in done.stdout, done.stdout


def test_the_runner_holds_markers_to_what_they_say(redis_server, tmp_path):
    """A block marked to raise that does not, a shell block marked exit 2 that exits 0, and a
    background process that does not exit 0 on SIGTERM each fail their page."""
    for block, says in ((f"<!-- docs: raises ValueError -->\n{FENCE}python\nx = 1\n{FENCE}", "should raise ValueError"),
                        (f"<!-- docs: exit 2 -->\n{FENCE}sh\ntrue\n{FENCE}", "exited 0, not 2"),
                        (f"<!-- docs: background -->\n{FENCE}sh\ntrap 'exit 3' TERM; while :; do sleep 0.1; done\n{FENCE}",
                         "the background block exited 3")):
        page = tmp_path / "page.md"
        page.write_text(f"# A page\n\n{block}\n")
        done = run_page(page, redis_server, tmp_path / "run")
        assert done.returncode == 1 and says in done.stdout, done.stdout


def test_a_block_in_an_unknown_language_or_with_a_misfit_marker_is_refused(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"{FENCE}bash\nls\n{FENCE}\n\n<!-- docs: background -->\n{FENCE}python\nx = 1\n{FENCE}\n\n"
                    f"<!-- docs: skip -->\n{FENCE}sh\nls\n{FENCE}\n\n<!-- docs: sometimes -->\n{FENCE}sh\nls\n{FENCE}\n")
    found = [problem for block in docs_examples.blocks(page) for problem in docs_examples.problems(block)]
    assert [problem.split(": ", 1)[1] for problem in found] == [
        "a block needs one of these languages: python, sh, go, text, json, promql, ini, yaml, toml, lua, diff "
        "(got 'bash')",
        "`docs: background` does not fit a python block",
        "`docs: skip` does not fit a sh block",
        "unknown directive 'sometimes': one of skip, background, exit, raises, needs",
    ]


def test_the_readme_is_short_with_code_on_its_first_screen():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    first_code = next(number for number, line in enumerate(lines, 1) if line.startswith("```"))
    assert first_code <= 40, f"README.md's first code block starts on line {first_code}"


# The site, built once for the tests below as `make docs` builds it


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(directory)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr
    return directory


def _text(path: Path) -> str:
    """The words of an HTML page, tags dropped and entities undone."""
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", path.read_text()))


def _help_texts() -> List[str]:
    """What `--help` prints for every command and subcommand (their mains, called here: a process each
    would cost half a second apiece for the same parsers)."""
    from delayed.ops.cli import main as delayed_main

    commands = [["--help"], *[[name, "--help"] for name in ("worker", "sweeper", "scheduler", "metrics", "dashboard",
                                                            "contract", "stats", "workers", "enqueue", "task", "cancel",
                                                            "pause", "resume")]]
    commands += [["dead", name, "--help"] for name in ("list", "show", "requeue", "delete", "purge")]
    commands += [["scheduled", "list", "--help"]]
    commands += [["contract", name, "--help"] for name in ("go", "check", "python", "gotasks")]
    texts = []
    for command in commands:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
            delayed_main(command)
        assert exited.value.code == 0, command
        texts.append(out.getvalue())
    return texts


def test_every_argument_help_prints_is_on_the_command_line_page(site):
    page = _text(site / "reference" / "cli" / "index.html")
    helps = _help_texts()
    flags = {flag for text in helps for flag in re.findall(r"(?<![\w-])--?[a-z][\w-]*", text)}
    assert len(flags) > 40
    assert sorted(flag for flag in flags if flag not in page) == []
    # and each help line's words: a flag's help that drifted from the page would show here
    for text in helps:
        for line in re.findall(r"^  (--[\w-]+(?: [A-Z_.]+)?)", text, re.M):
            assert line in page


def test_every_name_delayed_exports_is_in_the_api_reference(site):
    page = (site / "reference" / "api" / "index.html").read_text()
    missing = [name for name in delayed.__all__ if f'id="delayed.{name}"' not in page and f">{name}<" not in page]
    assert missing == []


def test_every_metric_family_is_on_the_metrics_page(site):
    from delayed.ops.metrics.queues import SERIES as QUEUE_SERIES
    from delayed.worker.metrics import SERIES as WORKER_SERIES

    page = _text(site / "metrics" / "index.html")
    assert [series.name for series in (*WORKER_SERIES, *QUEUE_SERIES) if series.name not in page] == []
