"""The standard tool set and the ToolBox that dispatches a model's tool calls by name."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from avibe.errors import ToolError
from avibe.ports import RecordStore, Tool, ToolResult
from avibe.record.messages import ToolCall, ToolSpec
from avibe.sources.background import BackgroundJobs
from avibe.tools.approval import ApprovalPolicy
from avibe.tools.base import check_arguments
from avibe.tools.files import EditFile, ReadFile, ReadLedger, WriteFile
from avibe.tools.plan import UpdatePlan
from avibe.tools.record_query import RecordQuery
from avibe.tools.sandbox import DEFAULT_MODE, SandboxPolicy
from avibe.tools.search import ListFiles, SearchFiles
from avibe.tools.shell import Shell
from avibe.tools.skills import CompanionMark, SkillLoad
from avibe.tools.undo import Snapshots, latest_input


class ToolBox:
    """Tools by name. `dispatch` turns an unknown name or bad arguments into an error result the model
    can act on; only harness bugs escape as exceptions."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.spec.name in self._tools:
                raise ValueError(f"two tools are named {tool.spec.name!r}")
            self._tools[tool.spec.name] = tool

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    @property
    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self._tools.values()]

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def dispatch(self, call: ToolCall) -> ToolResult:
        tool = self._tools.get(call.name)
        if tool is None:
            names = ", ".join(self._tools) or "none"
            return ToolResult(
                output=f"there is no tool named {call.name!r}; the tools are: {names}", is_error=True
            )
        try:
            arguments = check_arguments(tool.spec, call.arguments)
        except ToolError as exc:
            return ToolResult(output=str(exc), is_error=True)
        return tool.run(arguments)


def default_tools(
    workdir: Path,
    *,
    store: RecordStore,
    session_id: str,
    skill_dirs: Sequence[Path] = (),
    jobs: BackgroundJobs | None = None,
    read_roots: Sequence[Path] = (),
    sandbox: SandboxPolicy | None = None,
    approval: ApprovalPolicy | None = None,
    stop: threading.Event | None = None,
    skill_mark: CompanionMark | None = None,
    undo_dir: Path | None = None,
) -> list[Tool]:
    """Vibey's standard tools over `workdir`: files (the skills dirs and `read_roots` readable too),
    shell (background commands when `jobs` is given), skill_load, record_query. One `sandbox` binds
    the shell and the file tools alike (by default the default mode with nothing extra
    hidden): its mode, Avibe's own files, the deny rules. `approval`: the person's
    deny rules bind write_file and edit_file; in ask mode writes and shell commands wait for approval.
    `stop`: the session's stop switch; set, a running shell command is killed. `skill_mark`:
    what a loaded skill shows beside a file of its folder the agent changed. `undo_dir`: where write_file
    and edit_file keep each file as it was before a turn changed it (`avibe.tools.undo`; in Avibe's home,
    out of the agent's reach); None: nothing kept."""
    sandbox = sandbox or SandboxPolicy(DEFAULT_MODE, workdir)
    deny = approval.rules.deny if approval is not None else ()
    outputs = [jobs.log_dir] if jobs is not None else []  # a finished job's full output is named there
    policy = sandbox.file_policy([*read_roots, *outputs, *(d for d in skill_dirs if d.is_dir())], deny)
    ledger = ReadLedger()  # what this session read: write_file overwrites only a file read and unchanged
    snapshots = None if undo_dir is None else Snapshots(undo_dir, latest_input(store, session_id))
    return [
        ReadFile(policy, ledger),
        WriteFile(policy, ledger, approval, snapshots),
        EditFile(policy, ledger, approval, snapshots),
        ListFiles(policy),
        SearchFiles(policy),
        Shell(workdir, jobs, sandbox=sandbox, approval=approval, stop=stop),
        UpdatePlan(),
        SkillLoad(skill_dirs, skill_mark),
        RecordQuery(store, session_id),
    ]
