"""Approval modes and path rules: the pure matching, and the real tools on real files -
write_file and edit_file never change a denied path, whatever mode; in ask mode writes and shell
commands that no allow rule covers wait for the person, and with nobody to ask they are refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from avibe.tools import EditFile, PathPolicy, WriteFile
from avibe.tools.approval import (
    ApprovalPolicy,
    ApprovalRequest,
    Decision,
    Rules,
    command_allowed,
    compile_path_rule,
)
from avibe.tools.sandbox import SandboxPolicy
from avibe.tools.shell import Shell


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("vendor/**", ["vendor/x", "vendor/a/b.py", "vendor/"], ["vendor", "src/vendor/x", "vendorx/y"]),
        ("vendor", ["vendor", "vendor/x", "lib/vendor/x"], ["vendors/x", "src/vendored"]),
        ("vendor/", ["vendor/x", "a/vendor/b"], ["vendors"]),
        ("/vendor", ["vendor/x"], ["a/vendor/x"]),
        ("./vendor/*.py", ["vendor/a.py", "vendor/a.py/x"], ["vendor/a/b.py", "vendor/a.txt"]),
        ("*.lock", ["poetry.lock", "a/b/yarn.lock"], ["lock", "a.lock.txt"]),
        ("**/secrets/*", ["secrets/k", "a/b/secrets/k"], ["secret/k"]),
        ("docs/**/draft?.md", ["docs/draft1.md", "docs/a/b/draft2.md"], ["docs/draft10.md"]),
        ("build[0-9]", ["build1/x"], ["buildx/x", "build/x"]),
        ("file[!a]", ["fileb"], ["filea", "file/"]),
    ],
)
def test_path_rules_match_gitignore_style(pattern: str, matches: list[str], misses: list[str]) -> None:
    regex = compile_path_rule(pattern)
    for path in matches:
        assert regex.fullmatch(path), (pattern, path)
    for path in misses:
        assert not regex.fullmatch(path), (pattern, path)


@pytest.mark.parametrize("bad", ["", "  ", "/", "../x", "a/../b", "x[ab", "a\x00b"])
def test_malformed_path_rules_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="path rule"):
        compile_path_rule(bad)


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("git status", "git status"),
        ("  git status  ", "git status"),
        ("pytest -q tests/test_x.py", "pytest*"),
        ("git status --short", None),  # an exact rule covers only that line
        ("pytest; rm -rf .", None),
        ("pytest && curl evil", None),
        ("pytest | sh", None),
        ("pytest > out", None),
        ("pytest $(rm -rf .)", None),
        ("pytest `rm -rf .`", None),
        ("pytest\nrm -rf .", None),
        ("rm -rf .", None),
    ],
)
def test_allow_commands_cover_whole_lines_never_chained_ones(command: str, rule: str | None) -> None:
    assert command_allowed(["git status", "pytest*"], command) == rule


class Recorder:
    """An approver that answers from a list and records what it was asked."""

    def __init__(self, *answers: Decision) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request)
        return self.answers.pop(0)


@pytest.fixture
def vendor(workdir: Path) -> Path:
    (workdir / "vendor").mkdir()
    target = workdir / "vendor" / "x.py"
    target.write_text("upstream = 1\n")
    return target


def _tools(workdir: Path, approval: ApprovalPolicy) -> tuple[WriteFile, EditFile]:
    policy = PathPolicy.of(workdir)
    return WriteFile(policy, approval=approval), EditFile(policy, approval=approval)


@pytest.mark.parametrize("mode", ["auto", "ask"])
def test_a_denied_path_is_never_written_and_the_error_names_the_rule(
    workdir: Path, vendor: Path, mode: str
) -> None:
    approver = Recorder("always", "always")
    write, edit = _tools(workdir, ApprovalPolicy(mode, Rules(deny=("vendor/**",)), approver))  # type: ignore[arg-type]
    attempts = [
        write.run({"path": "vendor/x.py", "content": "hacked\n"}),
        write.run({"path": "vendor/x.py", "content": "more\n", "mode": "append"}),
        write.run({"path": "vendor/new.py", "content": "new\n"}),
        write.run({"path": "./src/../vendor/y.py", "content": "new\n"}),
        edit.run({"path": "vendor/x.py", "old": "upstream = 1", "new": "upstream = 2"}),
    ]
    for result in attempts:
        assert result.is_error and 'deny = ["vendor/**"]' in result.output, result.output
        assert result.files_modified == ()
    assert vendor.read_text() == "upstream = 1\n"
    assert sorted(p.name for p in vendor.parent.iterdir()) == ["x.py"]
    assert approver.asked == []  # a deny rule is not a question: no approval lifts it


def test_a_link_into_a_denied_folder_is_the_denied_folder(workdir: Path, vendor: Path) -> None:
    os.symlink(vendor.parent, workdir / "third_party")
    write, edit = _tools(workdir, ApprovalPolicy("auto", Rules(deny=("vendor/**",))))
    created = write.run({"path": "third_party/new.py", "content": "x\n"})
    assert created.is_error and "'vendor/new.py' may not be changed" in created.output
    result = edit.run({"path": "third_party/x.py", "old": "upstream = 1", "new": "upstream = 2"})
    assert result.is_error and "'vendor/x.py' may not be changed" in result.output
    assert vendor.read_text() == "upstream = 1\n"


def test_auto_mode_writes_elsewhere_at_once(workdir: Path, vendor: Path) -> None:
    write, edit = _tools(workdir, ApprovalPolicy("auto", Rules(deny=("vendor/**",))))
    assert not write.run({"path": "src/a.py", "content": "a = 1\n"}).is_error
    assert not edit.run({"path": "src/a.py", "old": "a = 1", "new": "a = 2"}).is_error
    assert (workdir / "src" / "a.py").read_text() == "a = 2\n"


def test_ask_mode_writes_wait_for_the_person(workdir: Path) -> None:
    approver = Recorder("no", "yes", "always")
    write, edit = _tools(workdir, ApprovalPolicy("ask", Rules(allow_writes=("notes/**",)), approver))
    refused = write.run({"path": "a.py", "content": "a = 1\n"})
    assert refused.is_error and "the person did not approve" in refused.output
    assert not (workdir / "a.py").exists()
    assert not write.run({"path": "a.py", "content": "a = 1\n"}).is_error  # yes: this once
    assert not edit.run({"path": "a.py", "old": "a = 1", "new": "a = 2"}).is_error  # always: a.py
    assert not edit.run({"path": "a.py", "old": "a = 2", "new": "a = 3"}).is_error  # not asked again
    assert not write.run({"path": "notes/today.md", "content": "hi\n"}).is_error  # allowed: not asked
    assert [(r.tool, r.action, r.subject) for r in approver.asked] == [
        ("write_file", "write", "a.py"),
        ("write_file", "write", "a.py"),
        ("edit_file", "write", "a.py"),
    ]
    assert approver.asked[0].detail == "new file, 1 line" and "+a = 1" in approver.asked[0].diff  # shown
    assert "-a = 1" in approver.asked[2].diff and "+a = 2" in approver.asked[2].diff
    assert (workdir / "a.py").read_text() == "a = 3\n"


def test_ask_mode_with_nobody_to_ask_refuses_and_says_what_is_allowed(workdir: Path) -> None:
    write, _ = _tools(workdir, ApprovalPolicy("ask", Rules(allow_writes=("notes/**",))))
    result = write.run({"path": "a.py", "content": "a = 1\n"})
    assert result.is_error and "nobody can approve here" in result.output and "notes/**" in result.output
    assert not (workdir / "a.py").exists()


def test_shell_in_ask_mode_runs_allowed_commands_and_asks_for_the_rest(workdir: Path) -> None:
    approver = Recorder("no", "always")
    rules = Rules(allow_commands=("echo allowed*",))
    shell = Shell(
        workdir,
        sandbox=SandboxPolicy("full-access", workdir),
        approval=ApprovalPolicy("ask", rules, approver),
    )
    allowed = shell.run({"command": "echo allowed > /dev/null; touch ran-1"})  # chained: asked, refused
    assert allowed.is_error and "the person did not approve" in allowed.output
    assert not (workdir / "ran-1").exists()
    ok = shell.run({"command": "echo allowed here"})
    assert not ok.is_error and "allowed here" in ok.output
    first = shell.run({"command": "touch ran-2"})
    again = shell.run({"command": "touch ran-2"})
    assert not first.is_error and not again.is_error and (workdir / "ran-2").exists()
    assert [r.subject for r in approver.asked] == ["echo allowed > /dev/null; touch ran-1", "touch ran-2"]


def test_shell_in_ask_mode_without_an_approver_refuses_before_running(workdir: Path) -> None:
    shell = Shell(workdir, sandbox=SandboxPolicy("full-access", workdir), approval=ApprovalPolicy("ask"))
    for background in (False, True):
        result = shell.run({"command": "touch ran", "background": background})
        assert result.is_error and "nobody can approve here" in result.output
    assert not (workdir / "ran").exists()


def test_auto_mode_shell_is_unchanged(workdir: Path) -> None:
    approver = Recorder()
    shell = Shell(
        workdir,
        sandbox=SandboxPolicy("full-access", workdir),
        approval=ApprovalPolicy("auto", None, approver),
    )
    assert not shell.run({"command": "touch ran"}).is_error and (workdir / "ran").exists()
    assert approver.asked == []


def test_bad_modes_and_rules_are_refused() -> None:
    with pytest.raises(ValueError, match="approval mode"):
        ApprovalPolicy("sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="path rule"):
        Rules(deny=("../etc",))
    with pytest.raises(ValueError, match="allow_commands"):
        Rules(allow_commands=(" ",))


def test_deny_rules_bind_the_sandboxed_shell_too(tmp_path: Path) -> None:
    """write_file refuses vendor/ and so does the shell: the sandbox mounts what a deny rule matches
    read-only, while the rest of the workdir stays writable."""
    from avibe.tools.sandbox import SandboxPolicy, bwrap_problem, protected_paths
    from avibe.tools.shell import Shell

    if bwrap_problem():
        pytest.skip(f"bubblewrap cannot run here: {bwrap_problem()}")
    work = tmp_path / "work"
    (work / "vendor" / "lib").mkdir(parents=True)
    (work / "vendor" / "lib" / "x.py").write_text("original\n")
    (work / "app.lock").write_text("lock\n")
    assert protected_paths(work, ("vendor/**", "*.lock")) == [str(work / "vendor"), str(work / "app.lock")]
    sandbox = SandboxPolicy("workspace-write", work, protected=("vendor/**", "*.lock"))
    shell = Shell(work, sandbox=sandbox)
    command = "echo hacked > vendor/lib/x.py; touch vendor/new.py; echo x >> app.lock; echo ok > mine.txt"
    shell.run({"command": command})
    assert (work / "vendor" / "lib" / "x.py").read_text() == "original\n"
    assert not (work / "vendor" / "new.py").exists() and (work / "app.lock").read_text() == "lock\n"
    assert (work / "mine.txt").read_text() == "ok\n"  # the rest of the workdir is still writable
