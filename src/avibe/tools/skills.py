"""Agent Skills: folders holding a `SKILL.md` (YAML front matter with `name` and `description`, then a
Markdown body) under one or more skills dirs.

The system prompt carries a one-line catalogue (`catalogue_text`); `skill_load` returns a skill's full
text and reports `skill_loaded` so the checkpoint can put loaded skills back by recency at their
*current* version (SPEC A1) - `SkillInfo.version` is the sha256 of the file, so a change is visible.
A malformed SKILL.md is skipped with a logged warning naming the file; it never stops discovery.

The project's skills folder lies in the workdir, where the agent writes, so every SKILL.md is read the
one way the harness reads such places (avibe/sources/agent_files.py): a project's `.avibe/skills` from
the project folder down, another skills folder from itself down, never through a link, only a regular
UTF-8 file of bounded size. One that cannot be read so is skipped with one logged line.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from avibe.errors import ToolError
from avibe.ports import ToolResult
from avibe.record.messages import ToolSpec
from avibe.sources.agent_files import list_agent_dir, read_agent_file
from avibe.tools.base import BaseTool, cut_text, schema

log = logging.getLogger(__name__)

SKILL_FILE: Final = "SKILL.md"
MAX_NAME_CHARS: Final = 64
MAX_CATALOGUE_DESCRIPTION: Final = 200  # one line per skill in the system prompt
MAX_SKILL_CHARS: Final = 60_000
MAX_SKILL_BYTES: Final = 256 * 1024  # a SKILL.md is instructions: more than this is not read
PROJECT_DIR: Final = ".avibe"  # a project's skills folder is `.avibe/skills` in it
_PLAIN_FIELD: Final = re.compile(r"([A-Za-z_][\w-]*):(.*)$")


@dataclass(frozen=True, slots=True)
class SkillInfo:
    name: str
    description: str
    path: Path  # the SKILL.md file
    version: str  # sha256 of the file's bytes

    @property
    def folder(self) -> Path:
        return self.path.parent

    def read(self) -> tuple[Path, Path]:
        """(root, path below it) the skill's files are read from: see `skill_root`."""
        root, below = skill_root(self.folder.parent)
        return root, below / self.folder.name


# What a skill's text may show beside a companion file (the agent's, never the user's):
# given the file and the sha256 of its content, "" or a mark.
CompanionMark = Callable[[Path, str], str]


class MalformedSkill(ValueError):
    """A SKILL.md that cannot be used; the message says what is wrong."""


def _front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter mapping, body) of a SKILL.md text; MalformedSkill when absent or not a mapping."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise MalformedSkill("does not start with a '---' front matter line")
    end = next((i for i, line in enumerate(lines[1:], start=1) if line.strip() == "---"), None)
    if end is None:
        raise MalformedSkill("front matter is not closed by a '---' line")
    try:
        meta = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        meta = _plain_fields(lines[1:end])
        if not {"name", "description"} <= meta.keys():
            raise MalformedSkill(f"front matter is not valid YAML: {exc}") from exc
        log.info("front matter read as plain 'key: value' lines (not valid YAML): %s", exc)
    if not isinstance(meta, dict):
        raise MalformedSkill("front matter is not a mapping of fields")
    return meta, "".join(lines[end + 1 :])


def _plain_fields(lines: list[str]) -> dict[str, Any]:
    """Front matter read as `key: value` lines, indented lines continuing the previous value. Many
    hand-written SKILL.md files have an unquoted colon in the description, which strict YAML refuses."""
    fields: dict[str, Any] = {}
    key = None
    for line in lines:
        match = _PLAIN_FIELD.match(line)
        if match:
            key = match.group(1)
            fields[key] = match.group(2).strip()
        elif key is not None and line[:1].isspace() and line.strip():
            fields[key] = f"{fields[key]} {line.strip()}".strip()
    return fields


def _field(meta: dict[str, Any], key: str) -> str:
    value = meta.get(key)
    if not isinstance(value, str) or not value.strip():
        raise MalformedSkill(f"front matter field '{key}' is missing or not a non-empty string")
    return value.strip()


def skill_root(folder: Path) -> tuple[Path, Path]:
    """(root, folder below it): a project's `.avibe/skills` is read from the project folder down (so a
    link for `.avibe` or `skills` is refused too), another skills folder (Avibe's home's) from itself."""
    if folder.parent.name == PROJECT_DIR:
        return folder.parent.parent, Path(PROJECT_DIR, folder.name)
    return folder, Path()


def _read_skill(root: Path, below: Path) -> tuple[str, str]:
    """(text, sha256) of the SKILL.md at `root / below`; MalformedSkill naming why it was not read."""
    found = read_agent_file(root, below, max_bytes=MAX_SKILL_BYTES)
    if not found.ok or found.digest is None:
        raise MalformedSkill(f"not read: {found.why()}")
    return found.text, found.digest


def parse_skill(path: Path, root: Path | None = None) -> SkillInfo:
    """The SkillInfo of one SKILL.md (read from `root` down; by default from its own folder, the file
    itself no link); MalformedSkill when it cannot be used."""
    base = root or path.parent
    text, digest = _read_skill(base, path.relative_to(base))
    meta, _ = _front_matter(text)
    name, description = _field(meta, "name"), _field(meta, "description")
    if len(name) > MAX_NAME_CHARS or any(ch.isspace() for ch in name):
        raise MalformedSkill(f"name {name!r} must be one word of at most {MAX_NAME_CHARS} characters")
    return SkillInfo(name, " ".join(description.split()), path, digest)


def _candidates(folder: Path) -> list[tuple[Path, Path]]:
    """(root, SKILL.md) of each skill folder in `folder`, listed with no link followed below the root."""
    root, below = skill_root(folder)
    names = list_agent_dir(root, below) or []
    found = [(root, folder / name / SKILL_FILE) for name in names]
    return [(root, path) for root, path in found if os.path.lexists(path)]


def skill_dirs(workdir: Path, avibe_home: Path) -> list[Path]:
    """Where skills live, in precedence order: the project's own, then the user's."""
    return [workdir / ".avibe" / "skills", avibe_home / "skills"]


def discover_skills(dirs: Iterable[Path]) -> list[SkillInfo]:
    """Every usable skill below the given dirs, sorted by name. Earlier dirs win a name clash (put the
    project's own skills before the user's)."""
    found: dict[str, SkillInfo] = {}
    for folder in dirs:
        for root, path in _candidates(folder):
            try:
                skill = parse_skill(path, root)
            except (MalformedSkill, OSError) as exc:
                log.warning("skipping skill file %s: %s", path, exc)
                continue
            if skill.name in found:
                log.warning("skill %r in %s is shadowed by %s", skill.name, path, found[skill.name].path)
                continue
            found[skill.name] = skill
    return sorted(found.values(), key=lambda s: s.name)


def catalogue_text(skills: Sequence[SkillInfo], mark: Callable[[SkillInfo], str] | None = None) -> str:
    """One line per skill for the system prompt; empty when there is none. `mark` adds a skill's
    provenance (a skill the agent wrote says so, never passing for the user's)."""
    lines = []
    for skill in skills:
        description = skill.description
        if len(description) > MAX_CATALOGUE_DESCRIPTION:
            description = description[: MAX_CATALOGUE_DESCRIPTION - 3].rstrip() + "..."
        lines.append(f"- {skill.name}: {description}{mark(skill) if mark else ''}")
    return "\n".join(lines)


def find_skill(dirs: Iterable[Path], name: str) -> SkillInfo | None:
    """The skill of that name as it is on disk now (its current version), or None."""
    return next((s for s in discover_skills(dirs) if s.name == name), None)


def skill_text(skill: SkillInfo, mark: CompanionMark | None = None) -> str:
    """The skill's full text as loaded into the context: a header naming it and its folder, then the
    whole SKILL.md as it is now (read the one safe way; a note when it no longer can be), then - with
    `mark` - the other files of its folder that the agent last changed, each with its mark."""
    root, below = skill.read()
    try:
        body, _ = _read_skill(root, below / SKILL_FILE)
    except MalformedSkill as exc:
        body = f"(SKILL.md {exc})"
    header = f"Skill '{skill.name}' (folder {skill.folder}; other files there belong to it):"
    marked = companion_marks(skill, mark) if mark else []
    tail = "".join(f"\n{line}" for line in marked)
    if marked:
        tail = f"\n\nFiles in its folder that the agent changed (not the user's words):{tail}"
    return f"{header}\n\n{body.rstrip()}{tail}\n"


def companion_marks(skill: SkillInfo, mark: CompanionMark) -> list[str]:
    """'- NAME<mark>' for each file beside SKILL.md (one level, no link followed) whose content is one
    the agent left."""
    root, below = skill.read()
    lines = []
    for name in list_agent_dir(root, below) or []:
        if name == SKILL_FILE:
            continue
        found = read_agent_file(root, below / name, max_bytes=MAX_SKILL_BYTES * 4, text=False)
        shown = mark(skill.folder / name, found.digest) if found.digest else ""
        if shown:
            lines.append(f"- {name}{shown}")
    return lines


class SkillLoad(BaseTool):
    """Load a skill from the catalogue by name."""

    def __init__(self, dirs: Sequence[Path], mark: CompanionMark | None = None) -> None:
        self._dirs, self._mark = tuple(dirs), mark
        self._spec = ToolSpec(
            name="skill_load",
            description="Load the full instructions of a skill from the skill catalogue, by its name.",
            parameters=schema({"name": ("string", "the skill's name as listed in the catalogue")}, ["name"]),
        )

    def _run(self, args: dict[str, Any]) -> ToolResult:
        skills = discover_skills(self._dirs)
        skill = next((s for s in skills if s.name == args["name"].strip()), None)
        if skill is None:
            names = ", ".join(s.name for s in skills) or "none are installed"
            raise ToolError(f"skill_load: no skill named {args['name']!r}; available: {names}")
        text = cut_text(
            skill_text(skill, self._mark), f"read the rest with read_file on {skill.path}", MAX_SKILL_CHARS
        )
        return self.report({**args, "name": skill.name}, text)

    @classmethod
    def report(cls, args: Mapping[str, Any], output: str) -> ToolResult:
        return ToolResult(output=output, skill_loaded=str(args["name"]).strip())
