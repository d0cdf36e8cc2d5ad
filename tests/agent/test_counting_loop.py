"""The loop counts its view with any TokenCounter the port allows. An additive counter
is cached per message; a chat template's exact count is not additive - it frames the whole list and cannot
count an empty one - so the loop counts such a view whole. A first embedded run crashed here."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from vibey_doubles import StepClock, send, tool_step, write_lines

from avibe.agent.loop import RunConfig, Vibey
from avibe.config import load_settings
from avibe.providers.modelfile import INSTALL_COMMAND, is_installed
from avibe.providers.scripted import ScriptedModel, reply
from avibe.record.messages import ChatMessage
from avibe.store import open_store
from avibe.tools import ToolBox, default_tools


class TemplateCounter:
    """Like a chat template: a default system prompt when the first message is not one, and no count
    for an empty list (the embedded model's template indexes messages[0])."""

    def count(self, text: str) -> int:
        return (len(text) + 3) // 4

    def count_messages(self, messages: Sequence[ChatMessage]) -> int:
        if not messages:
            raise IndexError("list object has no element 0")
        framing = 0 if messages[0].role == "system" else 20
        return framing + sum(self.count(m.content) + 4 for m in messages)


def _vibey(tmp_path: Path, counter: Any, steps: list[Any]) -> Vibey:
    store = open_store(f"sqlite:///{tmp_path / 'avibe.db'}")
    session = store.create_session(title="count").id
    write_lines(tmp_path / "work", "a.txt", 20)
    box = ToolBox(default_tools(tmp_path / "work", store=store, session_id=session))
    return Vibey(
        store=store, model=ScriptedModel.of(steps, window=8_000, max_output=1_000), counter=counter,
        clock=StepClock(), session_id=session, session_dir=tmp_path / "sess", tool_specs=box.specs,
        run_tool=box.dispatch, config=RunConfig(checkpoint_mode="structured"),
    )  # fmt: skip


def test_a_non_additive_counter_counts_the_whole_view(tmp_path: Path) -> None:
    counter = TemplateCounter()
    vibey = _vibey(tmp_path, counter, [tool_step("read_file", path="a.txt"), reply("read")])
    assert send(vibey, "Read a.txt.").reply == "read"
    state = vibey.load_state()
    assert vibey.tokens(state) == counter.count_messages(vibey.view(state)) + vibey.viewer.tools


@pytest.mark.embedded
def test_the_embedded_models_own_counter_runs_the_loop(tmp_path: Path) -> None:
    cache = load_settings().model_cache
    if not is_installed(cache):
        if os.environ.get("CI"):
            pytest.fail(f"the embedded model is not installed in {cache}; run `{INSTALL_COMMAND}`")
        pytest.skip(f"the embedded model is not installed; run `{INSTALL_COMMAND}`")
    from avibe.providers.embedded import open_embedded_counter

    counter = open_embedded_counter("embedded", cache)
    vibey = _vibey(tmp_path, counter, [tool_step("read_file", path="a.txt"), reply("read")])
    assert send(vibey, "Read a.txt.").reply == "read"
    state = vibey.load_state()
    assert vibey.tokens(state) == counter.count_messages(vibey.view(state)) + vibey.viewer.tools
