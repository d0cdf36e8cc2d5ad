"""A strict reader for one mapping of a file: typed getters that name the field, unknown keys refused."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast


class ScenarioError(ValueError):
    """A scenario file that does not follow docs/eval-format.md; the message names the field."""


class Reader:
    """Reads one mapping, remembering the path for error messages and rejecting unknown keys."""

    def __init__(self, data: object, path: str) -> None:
        if not isinstance(data, Mapping):
            raise ScenarioError(f"{path or 'scenario'}: expected a mapping, got {type(data).__name__}")
        self.data = cast(Mapping[str, object], data)
        self.path = path
        self.seen: set[str] = set()

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def raw(self, key: str, default: object = ..., *, required: bool = True) -> object:
        self.seen.add(key)
        if key in self.data:
            return self.data[key]
        if required and default is ...:
            raise ScenarioError(f"{self.at(key)}: required field is missing")
        return default

    def text(self, key: str, default: str | None = None) -> str:
        value = self.raw(key, ... if default is None else default)
        if not isinstance(value, str):
            raise ScenarioError(f"{self.at(key)}: expected a string, got {type(value).__name__}")
        return value

    def nonempty(self, key: str) -> str:
        value = self.text(key)
        if not value.strip():
            raise ScenarioError(f"{self.at(key)}: must not be empty")
        return value

    def choice(self, key: str, allowed: Sequence[str], default: str | None = None) -> str:
        value = self.text(key, default)
        if value not in allowed:
            raise ScenarioError(f"{self.at(key)}: {value!r} is not one of {', '.join(allowed)}")
        return value

    def integer(self, key: str, default: int | None = None) -> int:
        value = self.raw(key, ... if default is None else default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ScenarioError(f"{self.at(key)}: expected an integer, got {type(value).__name__}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise ScenarioError(f"{self.at(key)}: expected true or false, got {type(value).__name__}")
        return value

    def seq(self, key: str) -> list[object]:
        value = self.raw(key, [])
        if not isinstance(value, list):
            raise ScenarioError(f"{self.at(key)}: expected a list, got {type(value).__name__}")
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        values = self.seq(key)
        for i, value in enumerate(values):
            if not isinstance(value, str):
                raise ScenarioError(f"{self.at(key)}[{i}]: expected a string, got {type(value).__name__}")
        return tuple(cast(list[str], values))

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.seen)
        if unknown:
            raise ScenarioError(f"{self.path or 'scenario'}: unknown field(s) {', '.join(unknown)}")
