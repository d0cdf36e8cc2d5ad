"""Approval modes and path rules through Vibey: a scripted model that tries to change
vendor/ under the person's `deny = ["vendor/**"]` leaves every byte of it as it was and sees the refusal
naming the rule; in ask mode with nobody to ask, a shell command is refused before it runs, and with a
person, their "no" and "yes" decide. Real files, the real SQLite record, the real tools."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from vibey_doubles import CharCounter, StepClock, send, tool_step

from avibe.agent.loop import RunConfig, Vibey
from avibe.host.events import Event, ToolFinished
from avibe.providers.scripted import ModelRequest, ScriptedModel, Step, reply
from avibe.record.messages import ModelReply
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools
from avibe.tools.approval import ApprovalPolicy, ApprovalRequest, Approver, Decision, Rules
from avibe.tools.sandbox import SandboxPolicy

VENDORED = b"# vendored upstream code: never edit\nupstream = 1\n"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "vendor").mkdir(parents=True)
    (work / "vendor" / "x.py").write_bytes(VENDORED)
    (work / "src").mkdir()
    (work / "src" / "app.py").write_text("print('hi')\n")
    return work


def _run(
    tmp_path: Path, workdir: Path, steps: Sequence[Step], approval: ApprovalPolicy, task: str
) -> tuple[ScriptedModel, list[Event]]:
    store = open_store(f"sqlite:///{tmp_path / 'avibe.db'}")
    session = store.create_session(title="approval").id
    tools = default_tools(
        workdir,
        store=store,
        session_id=session,
        sandbox=SandboxPolicy("full-access", workdir),
        approval=approval,
    )
    toolbox = ToolBox(tools)
    model = ScriptedModel.of(steps, window=8_000, max_output=1_000)
    events: list[Event] = []
    vibey = Vibey(
        store=store,
        model=model,
        counter=CharCounter(),
        clock=StepClock(),
        session_id=session,
        session_dir=tmp_path / "sessions" / session,
        tool_specs=toolbox.specs,
        run_tool=toolbox.dispatch,
        config=RunConfig(checkpoint_mode="structured", max_steps=10),
        events=events.append,
    )
    assert not send(vibey, task).stopped
    store.close()
    assert model.remaining == 0
    return model, events


def _tool_outputs(request: ModelRequest) -> list[str]:
    return [m.content for m in request.messages if m.role == "tool"]


def test_a_scripted_model_cannot_change_a_denied_folder_and_sees_the_rule(
    tmp_path: Path, workdir: Path
) -> None:
    seen: list[str] = []

    def wrap_up(request: ModelRequest) -> ModelReply:
        seen.extend(_tool_outputs(request))
        return reply("vendor/ is protected by your rules; I left it alone.")

    steps: list[Step] = [
        tool_step("edit_file", path="vendor/x.py", old="upstream = 1", new="upstream = 2"),
        tool_step("write_file", path="vendor/x.py", content="deleted\n"),
        tool_step("shell", command="true"),  # auto mode: the shell is not asked about
        tool_step("write_file", path="vendor/new.py", content="x = 1\n"),
        wrap_up,
    ]
    rules = Rules(deny=("vendor/**",))
    _run(
        tmp_path, workdir, steps, ApprovalPolicy("auto", rules), "The user asked you to clean up vendor/x.py"
    )
    assert (workdir / "vendor" / "x.py").read_bytes() == VENDORED
    assert sorted(p.name for p in (workdir / "vendor").iterdir()) == ["x.py"]
    refusals = [text for text in seen if 'deny = ["vendor/**"]' in text]
    assert len(refusals) == 3, seen
    assert any("'vendor/x.py' may not be changed" in text for text in refusals)
    assert any("'vendor/new.py' may not be changed" in text for text in refusals)


def test_ask_mode_without_a_person_refuses_the_shell_and_the_model_hears_why(
    tmp_path: Path, workdir: Path
) -> None:
    seen: list[str] = []

    def wrap_up(request: ModelRequest) -> ModelReply:
        seen.extend(_tool_outputs(request))
        return reply("I could not run it: nobody can approve commands here.")

    steps: list[Step] = [
        tool_step("shell", command="rm -rf src"),
        tool_step("shell", command="git status"),
        wrap_up,
    ]
    approval = ApprovalPolicy("ask", Rules(allow_commands=("git status",)), approver=None)
    _, events = _run(tmp_path, workdir, steps, approval, "tidy up")
    assert (workdir / "src" / "app.py").read_text() == "print('hi')\n"
    assert "nobody can approve here" in seen[0] and "git status" in seen[0]
    assert "nobody can approve" not in seen[1]  # allowed: it ran (not a git repo, but it ran)
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert finished[0].is_error and finished[0].name == "shell"


class Person:
    def __init__(self, *answers: Decision) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request)
        return self.answers.pop(0)


def test_ask_mode_the_person_decides(tmp_path: Path, workdir: Path) -> None:
    person = Person("no", "yes")
    approver: Approver = person
    steps: list[Step] = [
        tool_step("write_file", path="src/new.py", content="a = 1\n"),
        tool_step("write_file", path="src/new.py", content="a = 1\n"),
        reply("done"),
    ]
    _run(tmp_path, workdir, steps, ApprovalPolicy("ask", Rules(), approver), "add src/new.py")
    assert [(r.tool, r.subject) for r in person.asked] == [("write_file", "src/new.py")] * 2
    assert (workdir / "src" / "new.py").read_text() == "a = 1\n"
