"""Prompt templates of the pure core (checkpoint request, structured questions, repair, recollection).

Plain `string.Template` files (`$name` fields) shipped as package data; read once and cached. They are
part of the code, not session data, so reading them is no IO of the session.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from string import Template


@cache
def template(name: str) -> Template:
    """The template `<name>.md` of this package (raises FileNotFoundError for an unknown name)."""
    return Template(files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8"))


def render(name: str, **fields: object) -> str:
    """The template filled in; a missing field raises KeyError (a bug in the caller, never data)."""
    return template(name).substitute({key: str(value) for key, value in fields.items()}).strip() + "\n"
