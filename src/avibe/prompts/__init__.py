"""Every text Avibe writes for a model, in one place below the pure core (`checkpoint/`, `context/`).

The templates are the `.md` files of this package: plain `string.Template` text with `$name` fields,
shipped as package data and read once through `importlib.resources` (they are part of the code, not
session data, so reading them is no IO of a session). A template's fields are its documented variables:
`fields(name)` lists them, and `render` refuses a missing or an unknown one (a bug in the caller, never
data). tests/test_prompts.py checks that every template is rendered by some code with exactly its fields.

What lives here: the instruction texts - the checkpoint requests (tools and structured mode), the
structured questions, the repair request, the harness notice, the recollection, the empty mind, the scene
template, the system prompt and Vibey's identity and rules (`avibe.prompts.vibey`). What stays with its
code: validation findings (`Problem` messages), tool refusals and one-word placeholders, which are
computed from the state they describe.

API:
    names() -> tuple[str, ...]            every template of the package, sorted
    fields(name: str) -> frozenset[str]    the `$name` fields of a template
    template(name: str) -> Template        the file's text without its final newline; FileNotFoundError
                                           for an unknown name
    render(name: str, **fields: object) -> str   filled in, stripped, one trailing newline (a message)
    fill(name: str, **fields: object) -> str     filled in as it stands (a piece of a larger text)
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from string import Template

SUFFIX = ".md"


@cache
def names() -> tuple[str, ...]:
    """The name of every template in this package (file name without `.md`), sorted."""
    found = (entry.name for entry in files(__name__).iterdir() if entry.name.endswith(SUFFIX))
    return tuple(sorted(name.removesuffix(SUFFIX) for name in found))


@cache
def template(name: str) -> Template:
    """The template `<name>.md` of this package, without the file's final newline (raises
    FileNotFoundError for an unknown name)."""
    text = files(__name__).joinpath(f"{name}{SUFFIX}").read_text(encoding="utf-8")
    return Template(text.removesuffix("\n"))


def fields(name: str) -> frozenset[str]:
    """The fields (`$name`) the template needs."""
    return frozenset(template(name).get_identifiers())


def fill(name: str, /, **values: object) -> str:
    """The template filled in as it stands (for a piece joined into a larger text). A missing field
    raises KeyError, and so does a field the template does not have (both are bugs in the caller)."""
    unknown = set(values) - fields(name)
    if unknown:
        raise KeyError(f"template {name!r} has no field {', '.join(sorted(unknown))}")
    return template(name).substitute({key: str(value) for key, value in values.items()})


def render(name: str, /, **values: object) -> str:
    """The template filled in (see `fill`), stripped, with one trailing newline: a whole message."""
    return fill(name, **values).strip() + "\n"
