"""The README and the docs stay true: the Quickstart's scripts exist, and every `vibe` command and option
the docs show - the command table in docs/cli.md, the shell blocks, the inline examples - is one `vibe`
really has (STYLE 10: docs that show CLI help are checked)."""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from avibe.cli import app

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CLI_DOC = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
PAGES = {"README.md": README} | {
    f"docs/{page.name}": page.read_text(encoding="utf-8") for page in sorted((ROOT / "docs").glob("*.md"))
}
GROUPS = {
    "skill",
    "watch",
    "timer",
    "callback",
    "config",
    "mcp",
}  # the command groups: `vibe watch add --help`


def _quickstart() -> list[str]:
    block = README.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.strip().splitlines()]


def _cli_rows() -> list[str]:
    """The first cell of every row of docs/cli.md's command table."""
    rows = [line for line in CLI_DOC.splitlines() if line.startswith("| `vibe ")]
    return [re.split(r"(?<!\\)\|", row)[1] for row in rows]  # `\|` inside a cell is not a column


def _shell_lines(text: str) -> list[str]:
    """The `vibe` command lines of a page's ```bash blocks, comments left out."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            command = line.split(" #", 1)[0].strip().removeprefix(".venv/bin/")
            if command.startswith("vibe "):
                lines.append(command)
    return lines


def _inline(text: str) -> list[str]:
    """`vibe ...` inline code spans outside code blocks (a span holding `...` or `/` alternatives is a
    pattern, not one command, and is left to the table)."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return [span for span in re.findall(r"`(vibe [a-z][^`]*)`", prose) if "..." not in span]


def _parse(usage: str) -> tuple[list[str], list[str]]:
    """A usage's command path (`watch add`, or `run`) and the options it names, quoted words left out."""
    try:
        words = shlex.split(usage)[1:]
    except ValueError:  # an unbalanced quote in a pattern such as `vibe run "TASK`
        words = usage.split()[1:]
    words = [w for w in words if not w.startswith(('"', "'"))]
    command = [w for w in words if re.fullmatch(r"[a-z][a-z-]*", w)][:2]
    options = re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", " ".join(words))
    path = command if command and command[0] in GROUPS else command[:1]
    return path, options


def _usages() -> list[tuple[str, list[str], list[str]]]:
    found: dict[tuple[str, ...], set[str]] = {}
    sources: dict[tuple[str, ...], str] = {}
    table = [u for row in _cli_rows() for u in re.findall(r"`(vibe [^`]+)`", row)]
    shown = [(name, u) for name, text in PAGES.items() for u in [*_shell_lines(text), *_inline(text)]]
    for where, usage in [*(("docs/cli.md", u) for u in table), *shown]:
        path, options = _parse(usage)
        if path:
            found.setdefault(tuple(path), set()).update(options)
            sources.setdefault(tuple(path), where)
    return [(sources[p], list(p), sorted(o)) for p, o in sorted(found.items())]


@cache
def _help(path: tuple[str, ...]) -> tuple[int, str]:
    env = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    result = CliRunner().invoke(app, [*path, "--help"], env=env)
    return result.exit_code, result.output


def test_quickstart_has_exactly_two_commands_and_their_scripts_exist() -> None:
    commands = _quickstart()
    assert commands == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    for command in commands:
        assert (ROOT / command.split()[1]).is_file()


def test_ci_runs_the_readmes_test_command() -> None:
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_the_command_table_lists_every_command() -> None:
    """docs/cli.md's table is the whole CLI: each of `vibe --help`'s commands has a row."""
    code, output = _help(())
    assert code == 0, output
    listed = {m for row in _cli_rows() for m in re.findall(r"`vibe ([a-z][a-z-]*)", row)}
    commands = set(re.findall(r"^│ ([a-z][a-z-]+)\s", output, flags=re.M))
    assert commands, output
    assert commands <= listed, f"not in docs/cli.md: {sorted(commands - listed)}"


@pytest.mark.parametrize(("where", "command", "options"), _usages())
def test_every_command_and_option_the_docs_show_exists(
    where: str, command: list[str], options: list[str]
) -> None:
    code, output = _help(tuple(command))
    assert code == 0, f"{where}: `vibe {' '.join(command)}`\n{output}"
    for option in options:
        assert option in output, f"{where}: `vibe {' '.join(command)}` has no {option}"


def test_every_script_the_docs_name_exists_and_parses() -> None:
    import subprocess

    named = {s: name for name, text in PAGES.items() for s in re.findall(r"bash (scripts/[\w.-]+\.sh)", text)}
    assert "scripts/eval-sweep.sh" in re.findall(r"bash (scripts/[\w.-]+\.sh)", PAGES["docs/eval.md"])
    for script, where in sorted(named.items()):
        assert (ROOT / script).is_file(), f"{where}: {script}"
        checked = subprocess.run(["bash", "-n", str(ROOT / script)], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr
