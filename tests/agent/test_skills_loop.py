"""A1 in the loop: a loaded skill whose text leaves the context at a checkpoint is put back at its current
version; one whose load output the checkpoint keeps is not put back twice; a skill loaded through the
shell (`vibe skill load`) is tracked like one loaded through the tool; a put-back skill
is read again every turn, so an edit made after the checkpoint is seen at the next turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from vibey_doubles import BEFORE_STEPS, CharCounter, StepClock, checkpoint_steps, send, tool_step, write_lines

from avibe.agent.loop import RunConfig, Vibey, shell_skill_load
from avibe.providers.scripted import ScriptedModel, reply
from avibe.record.messages import ToolCall
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools, find_skill, skill_text

SKILL = "---\nname: release-notes\ndescription: How to write release notes.\n---\nWrite RN-MARKER-{n}.\n"


def load_skill(call_id: str) -> Any:
    return reply(tool_calls=[ToolCall(call_id, "skill_load", {"name": "release-notes"})])


def _vibey(tmp_path: Path, steps: list[Any], put_back: bool = True) -> tuple[Vibey, ScriptedModel, Path]:
    skills = tmp_path / "skills"
    (skills / "release-notes").mkdir(parents=True)
    (skills / "release-notes" / "SKILL.md").write_text(SKILL.format(n=1))
    store = open_store(f"sqlite:///{tmp_path / 'avibe.db'}")
    session = store.create_session(title="skills").id
    work = tmp_path / "work"
    for name, lines in (("a.txt", 180), ("b.txt", 180), ("c.txt", 90)):
        write_lines(work, name, lines)
    box = ToolBox(default_tools(work, store=store, session_id=session, skill_dirs=[skills]))

    def current(name: str) -> str | None:
        found = find_skill([skills], name)
        return skill_text(found) if found and put_back else None

    model = ScriptedModel.of(steps, window=8_000, max_output=1_000)
    vibey = Vibey(
        store=store, model=model, counter=CharCounter(), clock=StepClock(), session_id=session,
        session_dir=tmp_path / "sess", tool_specs=box.specs, run_tool=box.dispatch,
        config=RunConfig(checkpoint_mode="structured"), skill_text=current,
    )  # fmt: skip
    return vibey, model, skills


def _run(vibey: Vibey, skills: Path) -> None:
    send(vibey, "Load the release-notes skill, then read a.txt.")
    (skills / "release-notes" / "SKILL.md").write_text(SKILL.format(n=2))  # edited since it was loaded
    send(vibey, "Read b.txt.")
    send(vibey, "Read c.txt.")


def _steps(load: Any) -> list[Any]:
    return [load, *BEFORE_STEPS, tool_step("read_file", path="c.txt"), *checkpoint_steps(5), reply("c read")]


STEPS = _steps(load_skill("load-1"))
# `vibe skill load` through the shell tool is tracked like the skill_load tool.
LOADS = {"tool": load_skill("load-1"), "shell": tool_step("shell", command="vibe skill load release-notes")}


@pytest.mark.parametrize("how", sorted(LOADS))
def test_A1_a_skill_whose_text_left_the_context_is_put_back_at_its_current_version(
    tmp_path: Path, how: str
) -> None:
    vibey, model, skills = _vibey(tmp_path, _steps(LOADS[how]))
    _run(vibey, skills)
    model.assert_consumed()
    [stored] = vibey.store.list_checkpoints(vibey.session_id)
    assert [s.name for s in stored.carry.skills] == ["release-notes"]
    after = "\n".join(m.content for m in model.requests[-1].messages)
    assert "RN-MARKER-1" not in after  # the loaded text moved out ...
    assert "RN-MARKER-2" in after  # ... and came back at its current version


def test_A1_a_skill_edited_after_the_checkpoint_is_put_back_at_its_new_text_next_turn(
    tmp_path: Path,
) -> None:
    """Put-back skills are read again each turn, not once at the checkpoint: an edit made after the
    checkpoint is what the next turn's recollection holds."""
    vibey, model, skills = _vibey(tmp_path, [*STEPS, reply("noted")])
    _run(vibey, skills)
    during = "\n".join(m.content for m in model.requests[-1].messages)
    assert "RN-MARKER-2" in during  # the put-back text the checkpoint's own turn went on with
    (skills / "release-notes" / "SKILL.md").write_text(SKILL.format(n=3))  # edited after the checkpoint
    send(vibey, "The release-notes skill changed; go on.")
    model.assert_consumed()
    assert len(vibey.store.list_checkpoints(vibey.session_id)) == 1  # no new checkpoint re-read it
    after = "\n".join(m.content for m in model.requests[-1].messages)
    assert "RN-MARKER-3" in after and "RN-MARKER-2" not in after


def test_A1_put_back_turned_off_loses_the_skill(tmp_path: Path) -> None:
    """The loop-level test above fails without put-back: this proves it measures it. Put-back is turned
    off through Vibey's own seam: its skill library has no text to put back."""
    vibey, model, skills = _vibey(tmp_path, STEPS, put_back=False)
    _run(vibey, skills)
    after = "\n".join(m.content for m in model.requests[-1].messages)
    assert "RN-MARKER" not in after


def test_A1_a_skill_still_in_the_context_is_not_put_back_twice(tmp_path: Path) -> None:
    steps = [*BEFORE_STEPS, load_skill("load-2"),
             tool_step("read_file", path="c.txt"), *checkpoint_steps(5), reply("c read")]  # fmt: skip
    vibey, model, _ = _vibey(tmp_path, steps)
    send(vibey, "Read a.txt.")
    send(vibey, "Read b.txt.")
    send(vibey, "Load the release-notes skill and read c.txt.")
    model.assert_consumed()
    [stored] = vibey.store.list_checkpoints(vibey.session_id)
    assert stored.carry.skills == ()  # its load output was kept: nothing to put back
    after = "\n".join(m.content for m in model.requests[-1].messages)
    assert after.count("RN-MARKER-1") == 1


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("vibe skill load release-notes", "release-notes"),
        ("cd x && vibe skill load 'deploy.v2' | head", "deploy.v2"),
        ("echo vibe skill loader", None),
        ("vibes skill load x", None),
    ],
)
def test_A1_a_skill_loaded_through_the_shell_is_recognised(command: str, name: str | None) -> None:
    assert shell_skill_load(ToolCall("c", "shell", {"command": command})) == name
    assert shell_skill_load(ToolCall("c", "read_file", {"command": command})) is None
