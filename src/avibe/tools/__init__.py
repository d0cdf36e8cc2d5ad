"""Vibey's tools (adapters): files, search, shell (with background commands), skills, record query.

Tool output goes to the live context only, never the record (SPEC A3); each output is bounded
(`MAX_OUTPUT_CHARS`) and mistakes the model can fix come back as `ToolResult(is_error=True)`.
"""

from avibe.tools.base import MAX_OUTPUT_CHARS, BaseTool, PathPolicy, check_arguments, cut_text
from avibe.tools.files import EditFile, ReadFile, WriteFile
from avibe.tools.record_query import RecordQuery, render_entry
from avibe.tools.search import ListFiles, SearchFiles
from avibe.tools.shell import Shell
from avibe.tools.skills import (
    SkillInfo,
    SkillLoad,
    catalogue_text,
    discover_skills,
    find_skill,
    skill_dirs,
    skill_text,
)
from avibe.tools.toolbox import ToolBox, default_tools

__all__ = [
    "MAX_OUTPUT_CHARS",
    "BaseTool",
    "EditFile",
    "ListFiles",
    "PathPolicy",
    "ReadFile",
    "RecordQuery",
    "SearchFiles",
    "Shell",
    "SkillInfo",
    "SkillLoad",
    "ToolBox",
    "WriteFile",
    "catalogue_text",
    "check_arguments",
    "cut_text",
    "default_tools",
    "discover_skills",
    "find_skill",
    "render_entry",
    "skill_dirs",
    "skill_text",
]
