"""The replay's toolbox: a recorded tool call answered with its recorded output, reported by the Avibe tool
it stands for (`BaseTool.report`, the path each tool's own `run` reports through), and the replay's job
table - what the host's `BackgroundJobs.waiting` would say (S3) - read from the shell's own words
(`avibe.tools.shell.started_job`).

A transcript imported from another agent keeps that agent's tool names and arguments (evals/importers);
the calls that are Avibe's tools under another name (Claude Code's Read, Edit, Bash ...) are read as those
tools, so an imported session's files (A2), skills (A1), plan, commands (S6) and background jobs (S3)
reach the checkpoint as a live session's would. Nothing here runs anything: the output is the recording.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from avibe.errors import ToolError
from avibe.ports import ToolResult
from avibe.record.messages import ToolCall
from avibe.tools.base import BaseTool
from avibe.tools.files import EditFile, ReadFile, WriteFile
from avibe.tools.plan import UpdatePlan
from avibe.tools.shell import Shell, started_job
from avibe.tools.skills import SkillLoad

ERROR_PREFIX: Final = "ERROR: "  # how the replay writes a failed call's output (`avibe.evals.replay`)

_TOOLS: Final[dict[str, type[BaseTool]]] = {
    "read_file": ReadFile,
    "write_file": WriteFile,
    "edit_file": EditFile,
    "update_plan": UpdatePlan,
    "skill_load": SkillLoad,
    "shell": Shell,
}
_PATH: Final = {"file_path": "path", "filePath": "path"}
_EDIT: Final = {**_PATH, "old_string": "old", "new_string": "new", "oldString": "old", "newString": "new"}
# Other agents' names (lower-cased) for Avibe's tools, and their arguments' names in Avibe's words: Claude
# Code (Read, Write, Edit, Bash, Skill), OpenCode (read, write, edit, bash).
_ALIASES: Final[dict[str, tuple[str, Mapping[str, str]]]] = {
    "read": ("read_file", _PATH),
    "write": ("write_file", _PATH),
    "edit": ("edit_file", _EDIT),
    "bash": ("shell", {"run_in_background": "background"}),
    "skill": ("skill_load", {"skill": "name"}),
}
_TODO_MARKS: Final = {"completed": "[x]", "in_progress": "[>]"}  # Claude Code's TodoWrite statuses
# Claude Code's Bash answer when it starts a command in the background (its words, not Avibe's)
_CLAUDE_STARTED: Final = re.compile(
    r"\ACommand running in background with ID: (?P<id>[\w.-]+?)\.?(?:\s+Output is being written to: "
    r"(?P<log>\S.*?))?\s*$",
    re.MULTILINE,
)


def _todo_plan(arguments: Mapping[str, Any]) -> str | None:
    """Claude Code's TodoWrite list as update_plan's lines, or None when it is not one."""
    todos = arguments.get("todos")
    if not isinstance(todos, list) or not all(isinstance(t, Mapping) for t in todos):
        return None
    return "\n".join(f"{_TODO_MARKS.get(str(t.get('status')), '[ ]')} {t.get('content', '')}" for t in todos)


def as_avibe(call: ToolCall) -> ToolCall:
    """The call as the Avibe tool it stands for (the same call when it is one, or no tool of Avibe's)."""
    name = call.name.lower()
    if name == "todowrite":
        plan = _todo_plan(call.arguments)
        return ToolCall(call.id, "update_plan", {"plan": plan}) if plan is not None else call
    if call.name in _TOOLS or name not in _ALIASES:
        return call
    avibe, renamed = _ALIASES[name]
    return ToolCall(call.id, avibe, {renamed.get(k, k): v for k, v in call.arguments.items()})


def _started(call: ToolCall, output: str) -> tuple[str, str, str] | None:
    """(job id, command, log) when the call started a background job: in the shell's own words, or in
    Claude Code's when the transcript is its."""
    command = str(call.arguments.get("command", ""))
    said = started_job(output)
    if said is not None:  # Avibe's shell names no log: the host knows it, not the tool's answer
        return said[0], said[1] or command, ""
    claude = _CLAUDE_STARTED.search(output) if call.arguments.get("background") else None
    return (claude["id"], command, claude["log"] or "") if claude else None


@dataclass
class ReplayToolBox:
    """The recorded outputs through the tools' report path, and the jobs the session waits for."""

    jobs: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # id -> (command, log, newest line)

    def result(self, call: ToolCall, output: str) -> tuple[ToolCall, ToolResult]:
        """The call as Avibe's tool and what that tool reports for the recorded `output` (written
        "ERROR: ..." for a failed call: reported as the failure it was, nothing else)."""
        avibe = as_avibe(call)
        if output.startswith(ERROR_PREFIX):
            return avibe, ToolResult(output.removeprefix(ERROR_PREFIX), is_error=True)
        tool = _TOOLS.get(avibe.name)
        try:
            result = tool.report(avibe.arguments, output) if tool else ToolResult(output)
        except (KeyError, ToolError):  # arguments the tool would have refused: its run failed
            return avibe, ToolResult(output, is_error=True)
        started = _started(avibe, output) if avibe.name == "shell" else None
        if started is not None:
            self.jobs[started[0]] = (started[1], started[2], "")
        return avibe, result

    def finished(self, job_id: str) -> None:
        """A job's callback arrived (T1): the session waits for it no more."""
        self.jobs.pop(job_id, None)

    def waiting(self) -> tuple[tuple[str, ...], ...]:
        """(id, command, log, newest output line) of each job still running, as `BackgroundJobs.waiting`."""
        return tuple((job, *info) for job, info in self.jobs.items())
