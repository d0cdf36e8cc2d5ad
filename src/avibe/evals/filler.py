"""Realistic-looking filler work for generated scenarios: file reads with their output, small edits, test
runs and searches. It costs tokens the way real work does, and never mentions any ground truth."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

from avibe.evals.scenario import AssistantTurn, ToolUse

VERBS: Final = ("load", "parse", "merge", "render", "sync", "flush", "resolve", "validate", "emit", "collect")
NOUNS: Final = (
    "ledger",
    "invoice",
    "shard",
    "cursor",
    "batch",
    "tenant",
    "payload",
    "manifest",
    "quota",
    "receipt",
    "bundle",
    "window",
    "digest",
    "roster",
)
FIELDS: Final = ("weight", "attempts", "offset", "total_cents", "priority", "age_s", "retries", "size")
NUDGES: Final = ("Looks good, carry on.", "OK.", "Fine by me, continue.", "Thanks. Keep going.", "Go on.")


@dataclass(frozen=True, slots=True)
class Project:
    """The fictional codebase the filler works in."""

    name: str  # e.g. "Larkspur"
    package: str  # e.g. "larkspur"
    modules: tuple[str, ...]


def make_project(rng: random.Random, name: str) -> Project:
    package = name.lower().replace(" ", "_")
    modules = tuple(
        sorted({f"{rng.choice(NOUNS)}_{rng.choice(('io', 'core', 'ops', 'util', 'api'))}" for _ in range(8)})
    )
    return Project(name, package, modules)


class Filler:
    """Produces filler turns; ids are numbered so a conversation's tool call ids stay unique."""

    def __init__(self, rng: random.Random, project: Project) -> None:
        self.rng = rng
        self.project = project
        self.counter = 0

    def _id(self) -> str:
        self.counter += 1
        return f"call_{self.counter:04d}"

    def _path(self) -> str:
        return f"src/{self.project.package}/{self.rng.choice(self.project.modules)}.py"

    def _func(self) -> str:
        return f"{self.rng.choice(VERBS)}_{self.rng.choice(NOUNS)}"

    def code(self, path: str) -> str:
        """A numbered listing (like `cat -n`) of a plausible Python module."""
        noun = self.rng.choice(NOUNS)
        lines = [
            f'"""{noun.title()} helpers for {self.project.name} ({path})."""',
            "",
            "from __future__ import annotations",
            "",
            "import logging",
            "from dataclasses import dataclass",
            "",
            "log = logging.getLogger(__name__)",
            "",
        ]
        fields = self.rng.sample(FIELDS, 3)
        lines += ["", "@dataclass", f"class {noun.title()}Record:", "    id: str"]
        lines += [f"    {f}: int = {self.rng.randint(0, 9)}" for f in fields]
        for _ in range(self.rng.randint(2, 4)):
            lines += self._function(noun, fields)
        return "\n".join(f"{i:>4}\t{line}" for i, line in enumerate(lines, 1))

    def _function(self, noun: str, fields: list[str]) -> list[str]:
        name, field = self._func(), self.rng.choice(fields)
        limit = self.rng.randint(2, 500)
        return [
            "",
            "",
            f"def {name}(records: list[{noun.title()}Record], limit: int = {limit}) -> list[str]:",
            f'    """Return the ids whose {field} stays within the limit."""',
            "    kept: list[str] = []",
            "    for rec in records:",
            f"        if rec.{field} > limit:",
            f'            log.debug("{name}: skip %s ({field}=%d)", rec.id, rec.{field})',
            "            continue",
            "        kept.append(rec.id)",
            "    return kept",
        ]

    def read(self) -> AssistantTurn:
        path = self._path()
        use = ToolUse(self._id(), "read_file", {"path": path}, self.code(path))
        return AssistantTurn(f"Let me read {path} first.", (use,))

    def edit(self) -> AssistantTurn:
        path, func = self._path(), self._func()
        old, new = f"limit: int = {self.rng.randint(2, 99)}", f"limit: int = {self.rng.randint(100, 999)}"
        line = self.rng.randint(20, 80)
        diff = f"@@ -{line} +{line} @@\n-    {old}\n+    {new}"
        out = f"Edited {path}: 1 replacement at lines {line}-{line + 2}.\n{diff}"
        use = ToolUse(self._id(), "edit_file", {"path": path, "old": old, "new": new}, out)
        return AssistantTurn(f"Raising the default limit of {func} in {path}.", (use,))

    def test(self) -> AssistantTurn:
        module = self.rng.choice(self.project.modules)
        count = self.rng.randint(6, 40)
        names = [f"tests/test_{module}.py::test_{self._func()} PASSED" for _ in range(self.rng.randint(4, 9))]
        out = "\n".join(
            [f"collected {count} items", "", *names, "", f"{count} passed in 0.{self.rng.randint(10, 99)}s"]
        )
        use = ToolUse(self._id(), "shell", {"command": f"pytest tests/test_{module}.py -v"}, out)
        return AssistantTurn("Running the tests for that module.", (use,))

    def search(self) -> AssistantTurn:
        func = self._func()
        hits = [
            f"{self._path()}:{self.rng.randint(10, 300)}:    kept = {func}(records, limit)"
            for _ in range(self.rng.randint(3, 8))
        ]
        use = ToolUse(self._id(), "search", {"pattern": func}, "\n".join(hits))
        return AssistantTurn(f"Searching for callers of {func}.", (use,))

    def turn(self) -> AssistantTurn:
        return self.rng.choice((self.read, self.read, self.edit, self.test, self.search))()

    def nudge(self) -> str:
        return self.rng.choice(NUDGES)
