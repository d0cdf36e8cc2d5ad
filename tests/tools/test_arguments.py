"""check_arguments: tool arguments checked with jsonschema against the schema each tool sends to the
model; every problem named on its own line, in words a small model can act on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from avibe.errors import ToolError
from avibe.ports import RecordStore
from avibe.record.messages import ToolSpec
from avibe.tools import check_arguments, default_tools
from avibe.tools.base import schema

SPEC = ToolSpec(
    "probe",
    "A tool for these tests.",
    schema(
        {
            "path": ("string", "a path"),
            "offset": ("integer", "a line"),
            "all": ("boolean", "every match"),
        },
        required=["path"],
    ),
)


def _problems(arguments: Any, spec: ToolSpec = SPEC) -> list[str]:
    with pytest.raises(ToolError) as err:
        check_arguments(spec, arguments)
    return str(err.value).splitlines()


def test_every_default_tool_sends_a_valid_json_schema(
    workdir: Path, store: RecordStore, session_id: str
) -> None:
    for tool in default_tools(workdir, store=store, session_id=session_id):
        Draft202012Validator.check_schema(tool.spec.parameters)  # raises SchemaError if not


def test_good_arguments_pass_with_quoted_numbers_and_booleans_taken_and_nulls_dropped() -> None:
    assert check_arguments(SPEC, {"path": "a.py", "offset": " 12 ", "all": "True"}) == {
        "path": "a.py",
        "offset": 12,
        "all": True,
    }
    assert check_arguments(SPEC, {"path": "a.py", "offset": 3.0, "all": None}) == {
        "path": "a.py",
        "offset": 3,
    }
    assert check_arguments(SPEC, {"path": "a.py", "offset": -2}) == {"path": "a.py", "offset": -2}


def test_every_problem_is_reported_at_once_one_line_each_naming_the_argument() -> None:
    assert _problems({"lines": 5, "colour": "red", "offset": "ten", "all": "maybe"}) == [
        "probe: unknown argument(s) colour, lines; it takes: path, offset, all",
        "probe: missing required argument(s) path",
        "probe: argument 'all' must be true or false, got 'maybe'",
        "probe: argument 'offset' must be an integer, got 'ten'",
    ]


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        ({"path": None}, "probe: missing required argument(s) path"),
        ({"path": ["a.py"]}, "probe: argument 'path' must be a string, got ['a.py']"),
        ({"path": "a", "offset": 1.5}, "probe: argument 'offset' must be an integer, got 1.5"),
        ({"path": "a", "offset": True}, "probe: argument 'offset' must be an integer, got True"),
        ({"path": "a", "offset": "--5"}, "probe: argument 'offset' must be an integer, got '--5'"),
        ({"path": "a", "offset": "²"}, "probe: argument 'offset' must be an integer, got '²'"),
        ({"path": "a", "offset": "1e3"}, "probe: argument 'offset' must be an integer, got '1e3'"),
        ({"path": "a", "all": 1}, "probe: argument 'all' must be true or false, got 1"),
        ({"path": "a\ud800b"}, "probe: argument 'path' holds an invalid character at 1"),
        ({"path": "a", "\ud800": 1}, "probe: unknown argument(s) \\ud800; it takes: path, offset, all"),
        ("a.py", "probe: arguments must be a JSON object with: path, offset, all"),
        ([{"path": "a.py"}], "probe: arguments must be a JSON object with: path, offset, all"),
    ],
)
def test_one_bad_argument_gives_one_line(arguments: Any, line: str) -> None:
    assert _problems(arguments) == [line]


def test_a_long_bad_value_is_shown_cut() -> None:
    (line,) = _problems({"path": "a", "offset": "x" * 500})
    assert line.startswith("probe: argument 'offset' must be an integer, got 'xxx") and len(line) < 140


def test_the_schema_decides_beyond_flat_types() -> None:
    """What the tool's schema says is what is checked: enums, nested objects, extra names it allows."""
    spec = ToolSpec(
        "shape",
        "A richer schema.",
        {
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["fast", "safe"]},
                "box": {"type": "object", "properties": {"w": {"type": "integer"}}},
            },
            "required": ["mode"],
        },
    )
    assert _problems({"mode": "wild", "box": {"w": "wide"}}, spec) == [
        "shape: argument 'box.w' must be an integer, got 'wide'",
        "shape: argument 'mode' must be one of fast, safe, got 'wild'",
    ]
    open_spec = ToolSpec("open", "Extra names allowed.", {**spec.parameters, "additionalProperties": True})
    assert check_arguments(open_spec, {"mode": "fast", "extra": 1}) == {"mode": "fast", "extra": 1}
    assert _problems({"mode": "fast", "extra": 1}, spec) == [
        "shape: unknown argument(s) extra; it takes: mode, box"
    ]


def test_a_tool_without_arguments_says_so() -> None:
    spec = ToolSpec("ping", "No arguments.", schema({}))
    assert check_arguments(spec, {}) == {}
    assert _problems({"x": 1}, spec) == ["ping: unknown argument(s) x; it takes: no arguments"]
