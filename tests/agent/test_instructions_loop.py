"""F4: the system prompt is rebuilt every turn - AGENTS.md and the skill catalogue are read again, so an
edit mid-chat is seen at the next turn; they are cached under the files' modification times, so a turn
where nothing changed reads nothing and the prompt's prefix stays the same."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vibey_doubles import CharCounter, StepClock, send

from avibe.agent.loop import RunConfig, Vibey
from avibe.compose.instructions import InstructionFiles
from avibe.compose.vibey import _instruction_files
from avibe.providers.scripted import ScriptedModel, reply
from avibe.store import open_store
from avibe.store.provenance import ProvenanceLedger
from avibe.tools import ToolBox, default_tools

SKILL = "---\nname: {name}\ndescription: {description}\n---\nDo it.\n"


def _skill(skills: Path, name: str, description: str) -> None:
    (skills / name).mkdir(parents=True, exist_ok=True)
    (skills / name / "SKILL.md").write_text(SKILL.format(name=name, description=description))


def _vibey(tmp_path: Path, steps: list[Any]) -> tuple[Vibey, ScriptedModel, Path, Path]:
    work, home = tmp_path / "work", tmp_path / "home"
    skills = work / ".avibe" / "skills"
    work.mkdir()
    home.mkdir()
    store = open_store(f"sqlite:///{tmp_path / 'avibe.db'}")
    session = store.create_session(title="f4").id
    box = ToolBox(default_tools(work, store=store, session_id=session))
    model = ScriptedModel.of(steps, window=8_000, max_output=1_000)
    instructions = _instruction_files(work, [skills, home / "skills"], ProvenanceLedger(home))
    vibey = Vibey(
        store=store, model=model, counter=CharCounter(), clock=StepClock(), session_id=session,
        session_dir=tmp_path / "sess", tool_specs=box.specs, run_tool=box.dispatch,
        config=RunConfig(checkpoint_mode="structured"), instructions=instructions,
    )  # fmt: skip
    return vibey, model, work, skills


def _system(model: ScriptedModel) -> str:
    return model.requests[-1].messages[0].content


def test_F4_an_AGENTS_md_edit_and_a_new_skill_mid_chat_are_seen_at_the_next_turn(tmp_path: Path) -> None:
    vibey, model, work, skills = _vibey(tmp_path, [reply("one"), reply("two"), reply("three")])
    (work / "AGENTS.md").write_text("Use tabs in Makefiles.\n")
    _skill(skills, "release-notes", "How to write release notes.")
    send(vibey, "Hello.")
    first = _system(model)
    assert "Use tabs in Makefiles." in first and "release-notes" in first
    (work / "AGENTS.md").write_text("Use spaces everywhere; never tabs.\n")  # edited mid-chat
    _skill(skills, "deploy", "How to deploy the staging box.")  # a skill added mid-chat
    send(vibey, "Go on.")
    second = _system(model)
    assert "Use spaces everywhere; never tabs." in second and "Use tabs in Makefiles." not in second
    assert "deploy" in second and "How to deploy the staging box." in second
    (work / "AGENTS.md").unlink()  # removed: gone from the next turn's prompt
    send(vibey, "And now?")
    assert "never tabs" not in _system(model)


def test_F4_nothing_changed_nothing_read_and_the_prompt_stays_byte_for_byte(tmp_path: Path) -> None:
    vibey, model, work, skills = _vibey(tmp_path, [reply("one"), reply("two")])
    (work / "AGENTS.md").write_text("Use tabs in Makefiles.\n")
    _skill(skills, "release-notes", "How to write release notes.")
    reader = vibey.instructions
    assert isinstance(reader, InstructionFiles)
    send(vibey, "Hello.")
    reads, first = reader.reads, _system(model)
    send(vibey, "Go on.")
    assert reader.reads == reads and _system(model) == first
    # cached by modification time: the same size and time reads as unchanged (no content hashing)
    stat = os.stat(work / "AGENTS.md")
    (work / "AGENTS.md").write_text("Use TABS in Makefiles.\n")
    os.utime(work / "AGENTS.md", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    reads = reader.reads
    assert "Use tabs" in reader()[0] and reader.reads == reads  # served from the cache: nothing read
    os.utime(work / "AGENTS.md", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert "Use TABS" in reader()[0]
