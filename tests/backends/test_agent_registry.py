"""One agent registry (`avibe.record.agents`): the backends, `vibe import`'s formats and the CLI's help all
read it, so an agent added there shows everywhere and no help text names a backend on its own."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from avibe.backends import BACKENDS, BackendError, backend_named
from avibe.cli import app
from avibe.evals.importers import AGENT_NAMES, FORMATS
from avibe.record.agents import AGENTS, VIBEY, agent_of_format, external_agents, listed

runner = CliRunner()


def _help(*args: str) -> str:
    result = runner.invoke(app, [*args, "--help"], terminal_width=400, env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return re.sub(r"[\s│]+", " ", result.output)  # rich's box and wrapping, read as plain words


def test_each_hosted_external_agent_has_one_backend_in_order() -> None:
    assert [b.name for b in BACKENDS] == [a.name for a in external_agents()]
    assert AGENTS[0].name == VIBEY and not AGENTS[0].external


def test_the_importer_reads_the_registry() -> None:
    assert {fmt: agent_of_format(fmt) for fmt in FORMATS} == AGENT_NAMES
    assert set(AGENT_NAMES.values()) <= {a.name for a in AGENTS}


def test_help_texts_list_every_registered_agent() -> None:
    names = [a.name for a in external_agents()]
    for command in (("run",), ("chat",)):
        text = _help(*command)
        assert all(name in text for name in names), (command, text)
    agents = _help("agents")
    assert all(a.title in agents for a in external_agents())
    imported = _help("import")
    assert all(a.title in imported for a in AGENTS if a.import_format in FORMATS)
    assert listed(FORMATS) in imported


def test_an_unknown_backend_is_refused_with_the_registry_names() -> None:
    try:
        backend_named("gpt-pilot")
    except BackendError as exc:
        assert all(a.name in str(exc) for a in external_agents()) and VIBEY in str(exc)
    else:
        raise AssertionError("an unknown backend was accepted")


def test_listed_reads_as_a_sentence() -> None:
    assert listed(("a",)) == "a"
    assert listed(("a", "b")) == "a or b"
    assert listed(("a", "b", "c"), "and") == "a, b and c"
