"""The person's stated bans in the tools (avibe/checkpoint/stated.py): write_file and edit_file refuse a
path the person's own words forbid, quoting them, and the sandboxed shell finds it read-only - read at
each call, so a ban said a moment ago holds and one the person lifted no longer does. Real files, real
bubblewrap."""

from __future__ import annotations

from pathlib import Path

import pytest

from avibe.checkpoint.stated import StatedBan, stated_bans
from avibe.tools import EditFile, PathPolicy, WriteFile
from avibe.tools.approval import ApprovalPolicy
from avibe.tools.sandbox import SandboxPolicy
from avibe.tools.shell import Shell

RULE = "Never modify anything under vendor/ - that code belongs to another team."


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    (root / "vendor" / "lib").mkdir(parents=True)
    (root / "vendor" / "parser.txt").write_text("version 2.0\n")
    (root / "vendor" / "lib" / "x.py").write_text("upstream = 1\n")
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("recieve\n")
    return root


class Said:
    """The person's messages so far, as the record would give them."""

    def __init__(self, *messages: str) -> None:
        self.messages = list(messages)

    def __call__(self) -> tuple[StatedBan, ...]:
        return stated_bans(enumerate(self.messages, 1))


def _files(work: Path, said: Said) -> tuple[WriteFile, EditFile]:
    approval = ApprovalPolicy("auto", stated=said)
    policy = PathPolicy.of(work)
    return WriteFile(policy, approval=approval), EditFile(policy, approval=approval)


def test_the_file_tools_refuse_a_stated_ban_and_quote_the_person(work: Path) -> None:
    said = Said(f"{RULE} Then fix the typo in docs/guide.md.")
    write, edit = _files(work, said)
    attempts = [
        edit.run({"path": "vendor/parser.txt", "old": "version 2.0", "new": "version 2.1"}),
        write.run({"path": "vendor/parser.txt", "content": "gone\n"}),
        write.run({"path": "vendor/new.txt", "content": "new\n"}),
        write.run({"path": "./docs/../vendor/lib/x.py", "content": "x\n"}),
    ]
    for result in attempts:
        assert result.is_error and result.files_modified == ()
        assert f'the user said, in message #1: "{RULE}"' in result.output, result.output
        assert "ask the user" in result.output
    assert (work / "vendor" / "parser.txt").read_text() == "version 2.0\n"
    assert sorted(p.name for p in (work / "vendor").iterdir()) == ["lib", "parser.txt"]
    fixed = edit.run({"path": "docs/guide.md", "old": "recieve", "new": "receive"})  # elsewhere: at once
    assert not fixed.is_error and (work / "docs" / "guide.md").read_text() == "receive\n"


def test_a_ban_is_read_at_each_call_and_lifted_by_the_person(work: Path) -> None:
    said = Said("Fix the typo in docs/guide.md.")
    _, edit = _files(work, said)
    said.messages.append(RULE)  # said after the tools were made
    args = {"path": "vendor/parser.txt", "old": "version 2.0", "new": "version 2.1"}
    assert edit.run(args).is_error
    said.messages.append("May you edit vendor/parser.txt?")  # a question lifts nothing
    assert edit.run(args).is_error
    said.messages.append("You may update vendor/parser.txt now: set it to 2.1.")
    assert not edit.run(args).is_error
    assert (work / "vendor" / "parser.txt").read_text() == "version 2.1\n"


def test_the_sandboxed_shell_cannot_change_a_stated_ban_either(work: Path, sandboxed: None) -> None:
    said = Said(RULE)
    sandbox = SandboxPolicy("workspace-write", work, stated=said)
    shell = Shell(work, sandbox=sandbox)
    command = (
        "echo hacked > vendor/parser.txt; rm -rf vendor/lib; touch vendor/new.txt; mv vendor gone; "
        "echo ok > docs/mine.txt"
    )
    result = shell.run({"command": command})
    assert f'[read-only here: vendor/ - the user forbade changing it (#1: "{RULE}")' in result.output
    assert (work / "vendor" / "parser.txt").read_text() == "version 2.0\n"
    assert (work / "vendor" / "lib" / "x.py").read_text() == "upstream = 1\n"
    assert not (work / "vendor" / "new.txt").exists() and not (work / "gone").exists()
    assert (work / "docs" / "mine.txt").read_text() == "ok\n"  # the rest stays writable
    said.messages.append("Go ahead and change vendor/ as ticket 004 says.")
    result = shell.run({"command": "echo 'version 2.1' > vendor/parser.txt"})
    assert (work / "vendor" / "parser.txt").read_text() == "version 2.1\n"
    assert "read-only here" not in result.output


def test_a_stated_pattern_that_is_no_path_rule_is_left_out_not_an_error(work: Path) -> None:
    broken = [StatedBan(1, "Never touch x[ab/.", "x[ab/")]
    approval = ApprovalPolicy("auto", stated=lambda: broken)
    approval.check_write("write_file", "docs/guide.md")  # nothing raised: the pattern matches nothing
    sandbox = SandboxPolicy("workspace-write", work, stated=lambda: [*broken, StatedBan(2, RULE, "vendor/")])
    args = sandbox.bwrap_args()
    assert str(work / "vendor") in args and not any("x[ab" in a for a in args)
