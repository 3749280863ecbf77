"""Every code block of README.md and docs/*.md a reader would paste runs here, read from
the markdown as written, against a real Ottla started by `make run`: a changed example is
tested as it now reads, and one that loses data or no longer matches the code fails.

The convention, visible in each block's info string (the words after its opening fence):

- ```` ```python ```` and ```` ```sh ````: run. A Python block that defines `test_*`
  functions is a pytest file run with the pytest plugin (its own broker); any other is a
  script, and a shell block runs in bash from the repository root, both against the
  `make run` broker.
- ```` ```LANG ROLE ````: shown, not run, and the ROLE says why: `output` (what a command
  prints), `fragment` (part of a file: server.properties, a CI job), `synopsis` (a
  command's forms, with placeholders), `diagram`, or `elsewhere` (a command that serves
  until stopped, builds an image, or is the suite itself: run by the test named beside it
  in the text, or by this module's `make run`).

An indented code block can carry no info string, so none is allowed. Tests never listen on
Kafka's ports: the blocks' addresses (127.0.0.1:9092, the admin endpoint's :9644, the
registry's :8081) are replaced by the `make run` broker's, and an `ottla` tool command
that relies on its default address is given the broker's (`rewrite`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from ottla.testing import BrokerProcess
from tests.unit.test_doc_links import kept_in_list

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = {"python", "sh"}
NOT_RUN = {"output", "fragment", "synopsis", "diagram", "elsewhere"}
FENCE = re.compile(r"^(\s*)(```|~~~)(.*)$")
# librdkafka's log lines at warning or worse ("%4|...|TERMINATE|... Producer terminating
# with 1 message still in queue"): an example that prints one has lost or failed something.
LIBRDKAFKA_WARNING = re.compile(r"^%[0-4]\|", re.MULTILINE)
TOOL_COMMANDS = re.compile(r"\bottla (produce|consume|topics \w+|groups \w+|transactions \w+|acls \w+)\b")


class Block(NamedTuple):
    page: Path
    line: int
    info: str
    text: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> tuple[list[Block], list[int]]:
    """The fenced blocks of a page, and the lines where an indented code block starts."""
    found: list[Block] = []
    indented: list[int] = []
    lines = page.read_text().split("\n")
    kept: list[str] = []
    i, previous_blank = 0, True
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            indent, marker = len(fence.group(1)), fence.group(2)
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(marker):
                end += 1
            found.append(Block(page, i + 1, fence.group(3).strip(),
                               "\n".join(body[indent:] for body in lines[i + 1:end]) + "\n"))
            i, previous_blank = end + 1, False
            continue
        if line.startswith(("    ", "\t")) and line.strip() and previous_blank and not kept_in_list(kept):
            indented.append(i + 1)
        kept.append(line)
        previous_blank = not line.strip()
        i += 1
    return found, indented


ALL_BLOCKS = [block for page in PAGES for block in blocks(page)[0]]
RUNNABLE = [block for block in ALL_BLOCKS if block.info in RUN]


def test_every_block_is_run_or_says_why_not():
    unmarked = [f"{block.name}: ```{block.info}" for block in ALL_BLOCKS
                if block.info not in RUN and (len(block.info.split()) != 2 or block.info.split()[1] not in NOT_RUN)]
    indented = [f"{page.relative_to(ROOT)}:{line}" for page in PAGES for line in blocks(page)[1]]
    assert unmarked == [], f"a block is run (```python, ```sh) or says why not (```LANG {'|'.join(sorted(NOT_RUN))})"
    assert indented == [], "an indented code block cannot say whether it runs: fence it"
    assert len(RUNNABLE) >= 6  # README's three, and the pytest plugin's examples


class MakeRun(BrokerProcess):
    """The README's `make run`, on free ports and a data directory of its own."""

    def command(self) -> list[str]:
        # setsid: make's children (the broker) in a process group of their own, stopped with it.
        return ["setsid", "make", "-s", "--no-print-directory", "-C", str(ROOT), "run", "PORT=0", "ADMIN_PORT=0",
                "SCHEMA_REGISTRY_PORT=0", f"DATA_DIR={self.data_dir}"]

    def stop_group(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(60)


@pytest.fixture(scope="module")
def make_run(tmp_path_factory):
    broker = MakeRun(str(tmp_path_factory.mktemp("make-run") / "data")).start(timeout=300)
    try:
        yield broker
    finally:
        broker.stop_group()
        broker.cleanup()


def rewrite(text: str, broker: BrokerProcess) -> str:
    """The block with the `make run` broker's addresses in place of the default ones."""
    assert broker.admin_url and broker.schema_registry_url
    for default, actual in (("http://127.0.0.1:8081", broker.schema_registry_url),
                            ("http://127.0.0.1:9644", broker.admin_url), ("localhost:9644", broker.admin_url),
                            ("127.0.0.1:9092", broker.bootstrap), ("localhost:9092", broker.bootstrap)):
        text = text.replace(default, actual)
    lines = []
    for line in text.split("\n"):
        if "--bootstrap-server" not in line:
            line = TOOL_COMMANDS.sub(lambda m: f"{m.group(0)} --bootstrap-server {broker.bootstrap}", line)
        if re.search(r"\bottla console\b", line) and "--admin-url" not in line:
            line = re.sub(r"\bottla console\b", f"ottla console --admin-url {broker.admin_url}", line)
        lines.append(line)
    return "\n".join(lines)


def _environment() -> dict[str, str]:
    # `ottla` as `make run` installed it; BROWSER=true: `ottla console` opens no window.
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", BROWSER="true",
                PYTHONUNBUFFERED="1")


@pytest.mark.parametrize("block", RUNNABLE, ids=[block.name for block in RUNNABLE])
def test_the_block_runs_as_written(block: Block, make_run: BrokerProcess, tmp_path: Path):
    if block.info == "python" and re.search(r"^def test_", block.text, re.MULTILINE):
        example = tmp_path / "test_example.py"
        example.write_text(block.text)
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(example)],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300, env=_environment())
    elif block.info == "python":
        done = subprocess.run([sys.executable, "-c", rewrite(block.text, make_run)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120, env=_environment())
    else:
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", rewrite(block.text, make_run)], cwd=ROOT,
                              capture_output=True, text=True, timeout=120, env=_environment())
    assert done.returncode == 0, f"{block.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert not LIBRDKAFKA_WARNING.search(done.stderr), f"{block.name} warned:\n{done.stderr[-3000:]}"
