"""Agent Skills: folders holding a `SKILL.md` (YAML front matter with `name` and `description`, then a
Markdown body) under one or more skills dirs.

The system prompt carries a one-line catalogue (`catalogue_text`); `skill_load` returns a skill's full
text and reports `skill_loaded` so the checkpoint can put loaded skills back by recency at their
*current* version (SPEC A1) - `SkillInfo.version` is the sha256 of the file, so a change is visible.
A malformed SKILL.md is skipped with a logged warning naming the file; it never stops discovery.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from avibe.errors import ToolError
from avibe.ports import ToolResult
from avibe.record.messages import ToolSpec
from avibe.tools.base import BaseTool, cut_text, schema

log = logging.getLogger(__name__)

SKILL_FILE: Final = "SKILL.md"
MAX_NAME_CHARS: Final = 64
MAX_CATALOGUE_DESCRIPTION: Final = 200  # one line per skill in the system prompt
MAX_SKILL_CHARS: Final = 60_000
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


def parse_skill(path: Path) -> SkillInfo:
    """The SkillInfo of one SKILL.md; MalformedSkill (or OSError) when it cannot be used."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedSkill("is not UTF-8 text") from exc
    meta, _ = _front_matter(text)
    name, description = _field(meta, "name"), _field(meta, "description")
    if len(name) > MAX_NAME_CHARS or any(ch.isspace() for ch in name):
        raise MalformedSkill(f"name {name!r} must be one word of at most {MAX_NAME_CHARS} characters")
    return SkillInfo(name, " ".join(description.split()), path, hashlib.sha256(data).hexdigest())


def _candidates(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p / SKILL_FILE for p in folder.iterdir() if (p / SKILL_FILE).is_file())


def skill_dirs(workdir: Path, avibe_home: Path) -> list[Path]:
    """Where skills live, in precedence order: the project's own, then the user's."""
    return [workdir / ".avibe" / "skills", avibe_home / "skills"]


def discover_skills(dirs: Iterable[Path]) -> list[SkillInfo]:
    """Every usable skill below the given dirs, sorted by name. Earlier dirs win a name clash (put the
    project's own skills before the user's)."""
    found: dict[str, SkillInfo] = {}
    for folder in dirs:
        for path in _candidates(folder):
            try:
                skill = parse_skill(path)
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
    provenance (issue 27 item 7: a skill the agent wrote says so, never passing for the user's)."""
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


def skill_text(skill: SkillInfo) -> str:
    """The skill's full text as loaded into the context: a header naming it and its folder, then the
    whole SKILL.md."""
    body = skill.path.read_bytes().decode("utf-8", errors="replace")
    header = f"Skill '{skill.name}' (folder {skill.folder}; other files there belong to it):"
    return f"{header}\n\n{body.rstrip()}\n"


class SkillLoad(BaseTool):
    """Load a skill from the catalogue by name."""

    def __init__(self, dirs: Sequence[Path]) -> None:
        self._dirs = tuple(dirs)
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
        text = cut_text(skill_text(skill), f"read the rest with read_file on {skill.path}", MAX_SKILL_CHARS)
        return ToolResult(output=text, skill_loaded=skill.name)
