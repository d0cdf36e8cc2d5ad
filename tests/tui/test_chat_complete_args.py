"""Tab completes a slash command's argument too (docs/chat.md): `/model ` offers the configured and
installed models, `/compaction ` the compactors by name. Textual's headless pilot on a scripted model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chat_doubles import run, until
from hypothesis import given
from hypothesis import strategies as st

from avibe.agent.compaction import compaction_names
from avibe.cli.models import model_choices
from avibe.config import DEFAULT_MODEL, load_settings
from avibe.providers.modelfile import EMBEDDED_MODELS, model_path
from avibe.providers.scripted import reply
from avibe.tui.commands import complete
from avibe.tui.widgets import ChatInput

CHOICES = {"compaction": compaction_names(), "model": ("openai/gpt-4o", "openai/gpt-5", "embedded")}


def test_an_argument_completes_among_its_commands_choices() -> None:
    assert complete("/compaction tr", CHOICES) == ("/compaction truncate ", ("truncate",))
    assert complete("/model openai/", CHOICES) == ("/model openai/gpt-", ("openai/gpt-4o", "openai/gpt-5"))
    assert complete("/model ", CHOICES)[1] == CHOICES["model"]
    assert complete("/compaction zz", CHOICES) == ("/compaction zz", ())
    assert complete("/log --gr", CHOICES) == ("/log --gr", ())  # no choices known: unchanged
    assert complete("/model a b", CHOICES) == ("/model a b", ())  # one argument only


@given(st.sampled_from(sorted(CHOICES)), st.text(alphabet="abcdefghijklmnopqrstuvwxyz/-.0", max_size=8))
def test_an_argument_completion_only_extends_what_was_typed(name: str, typed: str) -> None:
    text, fits = complete(f"/{name} {typed}", CHOICES)
    assert text.startswith(f"/{name} {typed}")
    assert set(fits) == {c for c in CHOICES[name] if c.startswith(typed)}
    assert all(c.startswith(text.partition(" ")[2].strip()) for c in fits)


def test_model_choices_are_the_configured_and_the_installed(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AVIBE_MODEL_CACHE", str(home / "models"))
    settings = load_settings()
    assert model_choices(settings) == (DEFAULT_MODEL,)
    spec = next(s for name, s in EMBEDDED_MODELS.items() if name != DEFAULT_MODEL)
    path = model_path(settings.model_cache, spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF")  # present: offered (switching verifies the file, as on start)
    assert model_choices(settings) == (DEFAULT_MODEL, spec.name)


def test_tab_completes_compaction_and_model_names_in_the_chat(make_chat: Any, workdir: Path) -> None:
    app, _ = make_chat([reply("hi")])

    async def scenario() -> None:
        async with app.run_test() as pilot:
            field = app.query_one(ChatInput)
            await until(pilot, lambda: app.session_id is not None)
            await pilot.press(*"/compaction ha", "tab")
            assert field.text == "/compaction handoff " and app.focused is field
            field.text = ""
            await pilot.press(*"/model ", "tab")  # several fit: listed, the text as it was
            assert field.text == "/model "
            shown = " ".join(str(n.message) for n in app._notifications)
            assert DEFAULT_MODEL in shown and "openai/gpt-4o" in shown  # configured, and the one in use
            field.text = ""
            await pilot.press(*"/model openai/g", "tab")
            assert field.text == "/model openai/gpt-4o "

    run(scenario)
