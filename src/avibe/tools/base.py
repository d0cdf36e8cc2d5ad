"""What every tool shares: argument checking, bounded output, and (re-exported from avibe/tools/paths.py)
the PathPolicy that keeps paths inside their roots.

A tool's `run` never lets a mistake the model can fix escape as an exception: bad arguments, bad paths
and OS errors on the files it names become `ToolResult(is_error=True)` with a message saying what to
do. Anything else that escapes is a harness bug.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any, Final

from jsonschema import Draft202012Validator, ValidationError

from avibe.errors import ToolError
from avibe.ports import ToolResult
from avibe.record.messages import ToolSpec
from avibe.tools.paths import PathPolicy, open_nofollow

__all__ = [
    "MAX_OUTPUT_CHARS",
    "SKIPPED_DIRS",
    "BaseTool",
    "PathPolicy",
    "check_arguments",
    "cut_text",
    "open_nofollow",
    "schema",
]

# Most characters one tool output may hold. The loop cuts again against the window (SPEC V9); this
# bound keeps a single careless `cat` from crowding out everything else first.
MAX_OUTPUT_CHARS: Final = 20_000
# Folders no listing or search walks into: tool caches and dependencies, never the user's work.
SKIPPED_DIRS: Final = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".tox",
    }
)

_INTEGER: Final = re.compile(r"-?[0-9]+")  # not str.isdigit: "²" and "--5" are no numbers int() reads
_JSON_TYPES: Final = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "a JSON object",
    "array": "a list",
}


def cut_text(text: str, hint: str, limit: int = MAX_OUTPUT_CHARS, *, keep_tail: bool = False) -> str:
    """The text, or its first `limit` characters plus a note saying how much was cut and what to do.

    `keep_tail` keeps the head and the tail (command output: the error is usually at the end).
    """
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    note = f"[output cut: {cut} more chars; {hint}]"
    if not keep_tail:
        return f"{text[:limit]}\n{note}"
    head = limit // 2
    return f"{text[:head]}\n{note}\n{text[len(text) - (limit - head) :]}"


def schema(properties: Mapping[str, tuple[str, str]], required: Iterable[str] = ()) -> dict[str, Any]:
    """A flat JSON schema small models can follow: `{name: (json type, description)}`."""
    return {
        "type": "object",
        "properties": {
            name: {"type": kind, "description": text} for name, (kind, text) in properties.items()
        },
        "required": list(required),
    }


def _lenient(props: Mapping[str, Any], arguments: Mapping[Any, Any]) -> dict[str, Any]:
    """The arguments without nulls (a model's way of leaving an optional one out), with quoted numbers
    and booleans turned into the schema's type: small models often write `"offset": "20"`."""
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if value is None:
            continue
        prop = props.get(key)
        kind = prop.get("type") if isinstance(prop, Mapping) else None
        if kind == "integer" and isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
            value = int(value.strip())
        elif kind == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)
        elif kind == "boolean" and isinstance(value, str) and value.strip().lower() in {"true", "false"}:
            value = value.strip().lower() == "true"
        out[str(key)] = value
    return out


def _shown(name: object) -> str:
    """A name as the model is shown it: a lone surrogate it sent comes back escaped, not as a crash."""
    return str(name).encode("utf-8", "backslashreplace").decode("utf-8")


def _kinds(expected: object) -> str:
    kinds = expected if isinstance(expected, list) else [expected]
    return " or ".join(_JSON_TYPES.get(str(k), str(k)) for k in kinds)


def _problem(error: ValidationError) -> str:
    """One jsonschema error as a sentence naming the argument and what it must be."""
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)[1:]
    subject = f"argument '{_shown(where)}'" if where else "arguments"
    got = f", got {error.instance!r:.80}"
    if error.validator == "type":
        return f"{subject} must be {_kinds(error.validator_value)}{got}"
    if error.validator == "enum" and isinstance(error.validator_value, list):
        return f"{subject} must be one of {', '.join(map(str, error.validator_value))}{got}"
    return f"{subject}: {error.message}"


def check_arguments(spec: ToolSpec, arguments: Any) -> dict[str, Any]:
    """The arguments checked with jsonschema against the schema the tool sends to the model
    (`spec.parameters`; unknown names refused unless it says otherwise): nulls dropped, quoted numbers
    and booleans accepted. Raises ToolError naming every problem, one line each, so the model can fix
    them all in one go."""
    params: Mapping[str, Any] = spec.parameters
    props: Mapping[str, Any] = params.get("properties", {})
    names = ", ".join(props) or "no arguments"
    if not isinstance(arguments, Mapping):
        raise ToolError(f"{spec.name}: arguments must be a JSON object with: {names}")
    args = _lenient(props, arguments)
    validator = Draft202012Validator({"additionalProperties": False, **params})
    unknown: list[str] = []
    missing: list[str] = []
    problems: list[str] = []
    for error in sorted(validator.iter_errors(args), key=lambda e: [str(p) for p in e.absolute_path]):
        if error.validator == "additionalProperties" and not error.absolute_path:
            unknown.extend(_shown(k) for k in args if k not in props)
        elif error.validator == "required" and not error.absolute_path:
            missing.extend(str(k) for k in error.validator_value if k not in args)
        else:
            problems.append(_problem(error))
    for key, value in args.items():  # a lone surrogate ("\ud800" in JSON): no file or command takes it
        if isinstance(value, str) and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                problems.append(f"argument '{_shown(key)}' holds an invalid character at {exc.start}")
    lines = [f"unknown argument(s) {', '.join(sorted(unknown))}; it takes: {names}"] if unknown else []
    lines += [f"missing required argument(s) {', '.join(dict.fromkeys(missing))}"] if missing else []
    lines += problems
    if lines:
        raise ToolError("\n".join(f"{spec.name}: {line}" for line in lines))
    return args


class BaseTool(ABC):
    """A tool with a fixed spec. Subclasses implement `_run` on checked arguments and raise ToolError
    for anything the model should hear about."""

    _spec: ToolSpec

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        try:
            return self._run(check_arguments(self._spec, arguments))
        except ToolError as exc:
            return ToolResult(output=str(exc), is_error=True)
        except OSError as exc:  # a file or process the model named: its problem to fix, not ours
            where = f" ({exc.filename})" if exc.filename else ""
            return ToolResult(output=f"{self._spec.name}: {exc.strerror or exc}{where}", is_error=True)

    @abstractmethod
    def _run(self, args: dict[str, Any]) -> ToolResult: ...

    @classmethod
    def report(cls, args: Mapping[str, Any], output: str) -> ToolResult:
        """What the tool reports to the loop for a call that succeeded with `output`: the output and what
        the call did besides (files read or changed, a skill loaded, the plan set). `_run` reports through
        here, and so does a recorded session read back (the eval's replay toolbox), so the two cannot say
        different things about the same call."""
        return ToolResult(output=output)
