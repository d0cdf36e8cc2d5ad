"""Strict reading of scenario files with pydantic: the base of the file models (strict types, unknown
fields refused), the field types they share, and pydantic's errors turned into one line per problem
that names the field path (`events[3].tool_uses[0].output: expected a string, got int`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Annotated, Any, Final, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

ROOT: Final = "scenario"  # how the whole file is named in a message
_EXPECTED: Final = {
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}

M = TypeVar("M", bound=BaseModel)


class ScenarioError(ValueError):
    """A scenario file that does not follow docs/eval-format.md; the message names the field."""


class FieldProblem(ValueError):
    """Raised by a model's own check about one of its fields: the message is placed at that field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class FileModel(BaseModel):
    """One mapping of a scenario file: exact types (no "3" for 3), no unknown fields."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


NonEmpty = Annotated[str, AfterValidator(_not_blank)]


def read(model: type[M], data: object, *, tagged: Collection[str] = ()) -> M:
    """`data` as `model`, or ScenarioError naming every bad field, one per line. `tagged`: the list
    fields holding a union told apart by its `type` (pydantic puts the tag in the path; it is left out)."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ScenarioError("\n".join(problems(err.errors(), tagged))) from None


def problems(errors: Sequence[ErrorDetails], tagged: Collection[str] = ()) -> list[str]:
    """One line per problem, `path: what is wrong`; unknown fields of one mapping share a line."""
    lines: list[tuple[str, str]] = []  # (where, what); "" for the unknown fields of `where`
    unknown: dict[str, list[str]] = {}
    for error in errors:
        loc = list(error["loc"])
        if len(loc) > 2 and loc[0] in tagged and isinstance(loc[1], int):
            del loc[2]  # the union's tag ("assistant"), not a field
        if error["type"] == "extra_forbidden":
            where = _path(loc[:-1]) or ROOT
            if where not in unknown:
                lines.append((where, ""))
            unknown.setdefault(where, []).append(str(loc[-1]))
            continue
        field, message = _message(error)
        lines.append((_path([*loc, *field]) or ROOT, message))
    return [
        f"{where}: {what or 'unknown field(s) ' + ', '.join(sorted(unknown[where]))}" for where, what in lines
    ]


def _message(error: ErrorDetails) -> tuple[list[str], str]:
    """(the field below the error's place that it is about, what is wrong) in this format's words."""
    kind, ctx, value = error["type"], error.get("ctx", {}), error["input"]
    if kind == "missing":
        return [], "required field is missing"
    if kind in _EXPECTED:
        return [], f"expected {_EXPECTED[kind]}, got {type(value).__name__}"
    if kind == "literal_error":
        return [], f"{value!r} is not one of {ctx['expected']}"
    if kind in {"union_tag_invalid", "union_tag_not_found"}:
        tag = [str(ctx["discriminator"]).strip("'")]
        if kind == "union_tag_not_found":
            return tag, "required field is missing"
        return tag, f"{ctx['tag']!r} is not one of {ctx['expected_tags']}"
    if kind == "value_error":
        cause: Any = ctx.get("error")
        if isinstance(cause, FieldProblem):
            return [cause.field], str(cause)
        return [], str(cause)
    return [], error["msg"]


def _path(loc: Sequence[int | str]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).removeprefix(".")
