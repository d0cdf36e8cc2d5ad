"""What every tool shares: argument checking, bounded output, paths kept inside their roots.

A tool's `run` never lets a mistake the model can fix escape as an exception: bad arguments, bad paths
and OS errors on the files it names become `ToolResult(is_error=True)` with a message saying what to
do. Anything else that escapes is a harness bug.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from avibe.errors import ToolError
from avibe.ports import ToolResult
from avibe.record.messages import ToolSpec

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

_JSON_TYPES: Final = {"string": "a string", "integer": "an integer", "boolean": "true or false"}


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


def _coerce(tool: str, name: str, kind: str, value: Any) -> Any:
    """The value as the schema's type. Small models often quote numbers and booleans; those strings
    are accepted, anything else of the wrong type is refused with the expected type."""
    if kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value.strip())
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
            return value.strip().lower() == "true"
    elif kind == "string" and isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:  # a lone surrogate from a "\ud800" JSON escape
                raise ToolError(
                    f"{tool}: argument '{name}' holds an invalid character at {exc.start}"
                ) from exc
        return value
    raise ToolError(f"{tool}: argument '{name}' must be {_JSON_TYPES.get(kind, kind)}, got {value!r:.80}")


def check_arguments(spec: ToolSpec, arguments: Any) -> dict[str, Any]:
    """The arguments checked against the tool's flat schema: known names, required present, types
    right. Raises ToolError with a message the model can act on."""
    props: dict[str, Any] = spec.parameters.get("properties", {})
    names = ", ".join(props) or "no arguments"
    if not isinstance(arguments, Mapping):
        raise ToolError(f"{spec.name}: arguments must be a JSON object with: {names}")
    unknown = sorted(str(k) for k in arguments if k not in props)
    if unknown:
        raise ToolError(f"{spec.name}: unknown argument(s) {', '.join(unknown)}; it takes: {names}")
    missing = [k for k in spec.parameters.get("required", []) if arguments.get(k) is None]
    if missing:
        raise ToolError(f"{spec.name}: missing required argument(s) {', '.join(missing)}")
    return {
        k: _coerce(spec.name, k, props[k].get("type", "string"), v)
        for k, v in arguments.items()
        if v is not None
    }


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


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


@dataclass(frozen=True, slots=True)
class PathPolicy:
    """Where file tools may look and what they may change.

    workdir:     relative paths start here; everything below it is readable and (by default) writable.
    read_roots:  extra folders readable too (e.g. the session's temporary dir, the skills dirs).
    write_only:  when set, the only files that may be changed, whatever the workdir (the checkpoint turn
                 may change its two files and nothing else, F3).

    Paths are resolved (symlinks followed) before the check, so neither `..` nor a link leads out.
    """

    workdir: Path
    read_roots: tuple[Path, ...] = ()
    write_only: frozenset[Path] | None = None
    _roots: tuple[Path, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "workdir", self.workdir.resolve())
        roots = (self.workdir, *(r.resolve() for r in self.read_roots))
        object.__setattr__(self, "_roots", roots)
        if self.write_only is not None:
            object.__setattr__(self, "write_only", frozenset(p.resolve() for p in self.write_only))

    @classmethod
    def of(
        cls,
        workdir: Path | str,
        read_roots: Iterable[Path | str] = (),
        write_only: Collection[Path] | None = None,
    ) -> PathPolicy:
        only = None if write_only is None else frozenset(Path(p) for p in write_only)
        return cls(Path(workdir), tuple(Path(r) for r in read_roots), only)

    def _resolve(self, raw: str) -> Path:
        if not raw.strip():
            raise ToolError("path is empty; give a path relative to the working directory")
        if "\x00" in raw:
            raise ToolError("path contains a NUL character")
        path = Path(os.path.expanduser(raw.strip()))
        return (path if path.is_absolute() else self.workdir / path).resolve()

    def readable(self, raw: str) -> Path:
        """The resolved path, if it lies inside the workdir or a read root; else ToolError."""
        path = self._resolve(raw)
        if not any(_inside(path, root) for root in self._roots):
            allowed = ", ".join(str(r) for r in self._roots)
            raise ToolError(f"path '{raw}' resolves to {path}, outside the readable folders ({allowed})")
        return path

    def writable(self, raw: str) -> Path:
        """The resolved path, if this policy lets it be changed; else ToolError."""
        path = self._resolve(raw)
        if self.write_only is not None:
            if path not in self.write_only:
                allowed = ", ".join(sorted(self.show(p) for p in self.write_only))
                raise ToolError(f"'{raw}' may not be changed here; only these files may: {allowed}")
        elif not _inside(path, self.workdir):
            raise ToolError(f"path '{raw}' resolves to {path}, outside the working directory {self.workdir}")
        return path

    def show(self, path: Path) -> str:
        """How a path is shown to the model and in file lists: relative to the workdir when inside."""
        if path == self.workdir:
            return "."
        return path.relative_to(self.workdir).as_posix() if _inside(path, self.workdir) else str(path)
