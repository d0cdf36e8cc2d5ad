"""ToolBox dispatch and the default tool set: every mistake a model can make comes back as an error
result, never an exception; schemas stay simple enough for small models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from avibe.ports import RecordStore, Tool
from avibe.record.messages import ToolCall
from avibe.tools import ToolBox, default_tools

EXPECTED = [
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "search_files",
    "shell",
    "update_plan",
    "skill_load",
    "record_query",
]


def _box(workdir: Path, store: RecordStore, session_id: str, skills: Path | None = None) -> ToolBox:
    return ToolBox(
        default_tools(workdir, store=store, session_id=session_id, skill_dirs=[skills] if skills else [])
    )


def test_default_tools_are_the_standard_set_with_small_flat_schemas(
    workdir: Path, store: RecordStore, session_id: str
) -> None:
    tools = default_tools(workdir, store=store, session_id=session_id)
    assert all(isinstance(t, Tool) for t in tools)
    box = ToolBox(tools)
    assert box.names == EXPECTED
    for spec in box.specs:
        params = spec.parameters
        assert params["type"] == "object" and len(params["properties"]) <= 5
        assert {p["type"] for p in params["properties"].values()} <= {"string", "integer", "boolean"}
        assert set(params["required"]) <= set(params["properties"])
        assert spec.description and len(spec.description) < 400


def test_dispatch_runs_the_named_tool(workdir: Path, store: RecordStore, session_id: str) -> None:
    box = _box(workdir, store, session_id)
    wrote = box.dispatch(ToolCall("c1", "write_file", {"path": "x.txt", "content": "hi\n"}))
    assert wrote.files_modified == ("x.txt",)
    read = box.dispatch(ToolCall("c2", "read_file", {"path": "x.txt"}))
    assert read.output == "     1\thi" and read.files_read == ("x.txt",)


def test_unknown_tool_and_bad_arguments_become_error_results(
    workdir: Path, store: RecordStore, session_id: str
) -> None:
    box = _box(workdir, store, session_id)
    unknown = box.dispatch(ToolCall("c1", "delete_everything", {}))
    assert unknown.is_error and "no tool named 'delete_everything'" in unknown.output
    assert "read_file" in unknown.output
    wrong_type = box.dispatch(ToolCall("c2", "shell", {"command": ["ls"]}))
    assert wrong_type.is_error and "'command' must be a string" in wrong_type.output
    not_object = box.dispatch(ToolCall("c3", "shell", "ls"))  # type: ignore[arg-type]
    assert not_object.is_error and "must be a JSON object" in not_object.output


def test_the_default_file_tools_share_one_read_ledger(
    workdir: Path, store: RecordStore, session_id: str
) -> None:
    """write_file overwrites only a file read in this session, whichever tool instance read it;
    two sessions' tool sets do not share what they read."""
    (workdir / "CHANGELOG.md").write_text("- 001\n")
    box, other = _box(workdir, store, session_id), _box(workdir, store, session_id)
    overwrite = ToolCall("w", "write_file", {"path": "CHANGELOG.md", "content": "- 002\n"})
    assert box.dispatch(overwrite).is_error
    other.dispatch(ToolCall("r0", "read_file", {"path": "CHANGELOG.md"}))
    assert box.dispatch(overwrite).is_error  # another session's read does not count
    box.dispatch(ToolCall("r1", "read_file", {"path": "CHANGELOG.md"}))
    assert not box.dispatch(overwrite).is_error
    assert (workdir / "CHANGELOG.md").read_text() == "- 002\n"


def test_skills_dirs_are_readable_through_read_file(
    tmp_path: Path, workdir: Path, store: RecordStore, session_id: str
) -> None:
    skills = tmp_path / "home-skills"
    (skills / "x").mkdir(parents=True)
    (skills / "x" / "notes.md").write_text("extra skill file\n")
    box = _box(workdir, store, session_id, skills)
    assert (
        "extra skill file"
        in box.dispatch(ToolCall("c", "read_file", {"path": str(skills / "x/notes.md")})).output
    )


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(["\ud800", "a\x00b", "../../etc/passwd", "((", "--5", "²", " 7 ", "TRUE"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from([*EXPECTED, "nope"]),
    arguments=st.dictionaries(
        st.sampled_from(
            [
                "path",
                "content",
                "mode",
                "old",
                "new",
                "pattern",
                "name",
                "offset",
                "limit",
                "seq_from",
                "text",
                "junk",
            ]
        ),
        _json,
        max_size=4,
    ),
)
def test_no_argument_a_model_sends_makes_a_tool_raise(
    workdir: Path, store: RecordStore, session_id: str, name: str, arguments: dict[str, Any]
) -> None:
    """Property (misbehaving model): any JSON arguments to any tool give a ToolResult, never an
    exception. Shell is left out of execution (random commands are not run) via a non-string command."""
    box = _box(workdir, store, session_id)
    if name == "shell":
        arguments = {**arguments, "command": 0}
    result = box.dispatch(ToolCall("c", name, arguments))
    assert isinstance(result.output, str)
